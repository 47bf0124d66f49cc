#!/usr/bin/env node
// Compile and parse CoffeeScript programs with the pinned toolchain of tools/coffee (chapter 08ca_coffee).
//
//   npm ci --prefix tools/coffee                      # once: coffeescript and acorn at the versions of package-lock.json
//   node tools/coffee/translate.js < programs.jsonl   # one JSON string (a CoffeeScript program) a line
//   node tools/coffee/translate.js --versions         # {"node": ..., "coffeescript": ..., "acorn": ...}
//
// For every input line, one output line, a JSON object:
//   cs_tokens  [[tag, value], ...]  CoffeeScript's lexer (`CoffeeScript.tokens`, after its rewriter), layout tokens
//                                   (INDENT, OUTDENT, TERMINATOR) included, as in Chen et al.'s data; values as strings
//   cs_tree    [labels, parents]    the compiler's own parse (`CoffeeScript.nodes(src).toString()`, the text of
//                                   `coffee --nodes`), its `Root` line dropped; a line `Value IdentifierLiteral: h`
//                                   is the node `Value IdentifierLiteral` with the leaf `h`, as Chen et al. split it
//   js         string               `CoffeeScript.compile(src)` (default options: the `(function(){...}).call(this)`
//                                   wrapper and the hoisted `var`s)
//   js_tokens  [[label, value], ...] acorn's tokens of `js`, the wrapper included (value null for punctuation)
//   js_tree    [labels, parents]    acorn's ESTree of `js`, simplified as Chen et al. did: the wrapper removed (the
//                                   root is the wrapper function's BlockStatement), binary, logical and assignment
//                                   nodes labelled by their operator, `Identifier` and `Literal` nodes with the name
//                                   or the number's text as a leaf, a call keeping only its callee and a member
//                                   expression only its object (Chen et al.'s trees have no call arguments and no
//                                   property names: `results.push(x)` is `CallExpression(MemberExpression(
//                                   Identifier(results)))`)
//   error      string|null          a program the compiler or acorn refuses: its message (the other fields absent)
//
//   node tools/coffee/translate.js --js < programs.jsonl   # JavaScript programs (to translate into CoffeeScript)
//
// reads JavaScript instead: a program is parsed as it is if it has the compiler's `(function(){...}).call(this)`
// wrapper, else inside one, and its line holds `js`, `js_tokens` and `js_tree` as above (and `error`).
// A tree is two arrays in preorder: the labels, and the index of each node's parent (-1 at the root). Nothing here
// recurses over a tree's depth (the compiler itself does).
"use strict";
const path = require("path");
const readline = require("readline");
const here = path.join(__dirname, "node_modules");
let CoffeeScript, acorn;
try {
  CoffeeScript = require(path.join(here, "coffeescript"));
  acorn = require(path.join(here, "acorn"));
} catch (e) {
  process.stderr.write(`the pinned toolchain is missing (${e.message.split("\n")[0]}); run: npm ci --prefix tools/coffee\n`);
  process.exit(3);
}
const ECMA = 2020;
const version = (name) => require(path.join(here, name, "package.json")).version;

function csTree(src) {
  // the indented text of `coffee --nodes` -> [labels, parents]; two spaces a level (nodes.coffee's TAB)
  const lines = CoffeeScript.nodes(src).toString().split("\n").filter((l) => l.trim() !== "");
  const labels = [], parents = [], open = [];            // open[d]: the index of the node open at depth d
  let shift = null;
  for (const line of lines) {
    const depth = (line.length - line.trimStart().length) / 2;
    const text = line.trim();
    if (shift === null) {                                // the first line: `Root` in CoffeeScript 2, dropped
      shift = text === "Root" ? 1 : 0;
      if (shift) continue;
    }
    const d = depth - shift;
    const cut = text.indexOf(": ");
    const label = cut >= 0 ? text.slice(0, cut) : text;
    labels.push(label); parents.push(d > 0 ? open[d - 1] : -1);
    open[d] = labels.length - 1; open.length = d + 1;
    if (cut >= 0) { labels.push(text.slice(cut + 2)); parents.push(open[d]); }
  }
  return [labels, parents];
}

const ONLY = { CallExpression: ["callee"], MemberExpression: ["object"] };   // what Chen et al.'s trees keep

function children(node) {
  // the node-valued fields, in acorn's order (every other field is a string, number, boolean or null)
  const out = [];
  for (const key of ONLY[node.type] || Object.keys(node)) {
    const v = node[key];
    if (Array.isArray(v)) { for (const x of v) if (x && typeof x.type === "string") out.push(x); }
    else if (v && typeof v === "object" && typeof v.type === "string") out.push(v);
  }
  return out;
}

function unwrap(program) {
  // Program > ExpressionStatement > CallExpression((function(){...}).call, [this]) -> the function's BlockStatement
  const s = program.body.length === 1 && program.body[0];
  const call = s && s.type === "ExpressionStatement" && s.expression;
  const callee = call && call.type === "CallExpression" && call.callee;
  const fn = callee && callee.type === "MemberExpression" && callee.object;
  if (!fn || fn.type !== "FunctionExpression") throw new Error("the compiled program has no (function(){...}).call(this) wrapper");
  return fn.body;
}

function jsTree(root) {
  const labels = [], parents = [], stack = [[root, -1]];
  while (stack.length) {
    const [node, parent] = stack.pop();
    const i = labels.length;
    if (typeof node === "string") { labels.push(node); parents.push(parent); continue; }
    const t = node.type;
    const op = t === "BinaryExpression" || t === "LogicalExpression" || t === "AssignmentExpression";
    labels.push(op ? node.operator : t); parents.push(parent);
    const kids = t === "Identifier" ? [node.name] : t === "Literal" ? [String(node.raw)] : children(node);
    for (let k = kids.length - 1; k >= 0; k--) stack.push([kids[k], i]);
  }
  return [labels, parents];
}

function parseJs(js) {
  // JavaScript as the compiler writes it: the tokens and the simplified tree of the wrapped program
  const js_tokens = [];
  for (const t of acorn.tokenizer(js, { ecmaVersion: ECMA })) js_tokens.push([t.type.label, t.value === undefined ? null : String(t.value)]);
  return { js, js_tokens, js_tree: jsTree(unwrap(acorn.parse(js, { ecmaVersion: ECMA }))) };
}

function readJs(src) {
  try {
    let wrapped = true;
    try { unwrap(acorn.parse(src, { ecmaVersion: ECMA })); } catch (e) { if (e instanceof SyntaxError) throw e; wrapped = false; }
    return { ...parseJs(wrapped ? src : `(function() {\n${src}\n}).call(this);\n`), error: null };
  } catch (e) {
    return { error: String(e.message || e).split("\n")[0] };
  }
}

function translate(src) {
  try {
    const cs_tokens = CoffeeScript.tokens(src).map((t) => [t[0], String(t[1])]);
    const cs_tree = csTree(src);
    return { cs_tokens, cs_tree, ...parseJs(CoffeeScript.compile(src)), error: null };
  } catch (e) {
    return { error: String(e.message || e).split("\n")[0] };
  }
}

if (process.argv.includes("--versions")) {
  process.stdout.write(JSON.stringify({ node: process.versions.node, coffeescript: version("coffeescript"),
                                        acorn: version("acorn") }) + "\n");
} else {
  const out = [];
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on("line", (line) => {
    if (line.trim() === "") return;
    let src;
    try { src = JSON.parse(line); } catch (e) { src = null; }
    const read = process.argv.includes("--js") ? readJs : translate;
    out.push(JSON.stringify(typeof src === "string" ? read(src) : { error: "an input line is not a JSON string" }));
    if (out.length >= 1000) { process.stdout.write(out.join("\n") + "\n"); out.length = 0; }
  });
  rl.on("close", () => { if (out.length) process.stdout.write(out.join("\n") + "\n"); });
}
