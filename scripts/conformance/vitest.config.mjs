// The suite's own runner leaves the subscription tests off; ours turns them on.
import { defineConfig } from "vitest/config"
export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
  },
})
