#!/usr/bin/env node
// Compiles every tool's inputSchema and outputSchema from a tools/list answer with Ajv in its
// default strict mode (draft 2020-12, the standard formats of ajv-formats), as the official
// TypeScript SDK's validator does, and fails on any compile error or strict-mode warning
// (unknown format, unknown keyword, ...). Issue 50 item 17.
//
// Usage: node ajv_strict.js TOOLS_JSON AJV_DIR
//   TOOLS_JSON: a file holding the tools/list `tools` array.
//   AJV_DIR: a folder with node_modules/ajv and node_modules/ajv-formats
//            (npm install --prefix AJV_DIR ajv@8 ajv-formats@3).
// Prints PASS/FAIL per schema and closes with 'N passed, N failed'; exits 1 on any failure.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [toolsPath, ajvDir] = process.argv.slice(2);
const load = createRequire(path.join(path.resolve(ajvDir), "package.json"));
const Ajv2020 = load("ajv/dist/2020").default;
const addFormats = load("ajv-formats").default;

const tools = JSON.parse(fs.readFileSync(toolsPath, "utf8"));
let passed = 0;
let failed = 0;
for (const tool of tools) {
  for (const key of ["inputSchema", "outputSchema"]) {
    const schema = tool[key];
    if (schema === undefined) continue;
    const warnings = [];
    const logger = { log() {}, warn: (...a) => warnings.push(a.join(" ")), error: (...a) => warnings.push(a.join(" ")) };
    const ajv = new Ajv2020({ logger });
    addFormats(ajv);
    let error = null;
    try {
      ajv.compile(schema);
    } catch (e) {
      error = e.message;
    }
    const problems = (error ? [error] : []).concat(warnings);
    if (problems.length === 0) {
      passed += 1;
    } else {
      failed += 1;
      console.log(`FAIL ${tool.name}.${key}: ${problems.join(" | ").slice(0, 600)}`);
    }
  }
}
if (passed + failed === 0) {
  console.log("FAIL no schema was compiled");
  failed = 1;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
