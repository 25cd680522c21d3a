// The Node reference Durable Streams server (@durable-streams/server, pinned in
// package.json) for bench/compare.sh: on --host/--port, until SIGTERM; in memory,
// or file-backed under --data-dir.
import { DurableStreamTestServer } from "@durable-streams/server"

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : fallback
}
const dataDir = arg("--data-dir", undefined)
const server = new DurableStreamTestServer({
  host: arg("--host", "127.0.0.1"),
  port: Number(arg("--port", "4437")),
  ...(dataDir ? { dataDir } : {}),
})
await server.start()
console.log(`node reference server on ${arg("--host", "127.0.0.1")}:${arg("--port", "4437")}`)
process.on("SIGTERM", async () => {
  await server.stop()
  process.exit(0)
})
