// The pinned suite with its opt-in subscription tests (PROTOCOL.md sections
// 6-7) enabled; the server runs with --allow-local-webhooks so the suite's
// webhook receiver on http://127.0.0.1 is an allowed target.
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

runConformanceTests({ baseUrl: process.env.CONFORMANCE_TEST_URL, subscriptions: true })
