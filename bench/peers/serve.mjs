// The Node reference Durable Streams server (@durable-streams/server, pinned in
// package.json) for bench/compare.sh: in memory, on --host/--port, until SIGTERM.
import { DurableStreamTestServer } from "@durable-streams/server"

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : fallback
}
const server = new DurableStreamTestServer({ host: arg("--host", "127.0.0.1"), port: Number(arg("--port", "4437")) })
await server.start()
console.log(`node reference server on ${arg("--host", "127.0.0.1")}:${arg("--port", "4437")}`)
process.on("SIGTERM", async () => {
  await server.stop()
  process.exit(0)
})
