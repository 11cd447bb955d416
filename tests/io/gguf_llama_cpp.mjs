// llama.cpp's side of tests/io/test_gguf_llama_cpp.py, through node-llama-cpp (its prebuilt CPU
// build of llama.cpp): node gguf_llama_cpp.mjs NODE_MODULES_DIR JOB.json > RESULT.json
//
// JOB.json: {"models": [{"label", "path", "texts": [string], "prompts": [[id]], "n_new": [n],
//            "generate": bool}]}
// RESULT:   {"models": [{"label", "version", "metadata": {dotted key: value}, "tensors":
//            [{"name", "dimensions", "ggmlType"}], "tokens": [[id]], "generated": [[id]],
//            "probabilities": [[p for each id]]}]}
// Token ids: model.tokenize(text, false) (special-token text such as "<|endoftext|>" is read as
// text, as `wte tokenize` does). Generation: one sequence, its history cleared per prompt, the
// prompt's ids evaluated, then n_new tokens at temperature 0 (greedy: the argmax of the logits),
// end-of-generation tokens included; float32 KV cache so an F32 model runs in float32 throughout.
// Probabilities: llama.cpp's distribution of the token after each prompt, softmax(logits) over
// the whole vocabulary (temperature 1, no top-k, top-p or min-p cut).
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modulesDir, jobPath] = process.argv.slice(2);
const entry = path.join(modulesDir, "node-llama-cpp", "dist", "index.js");
const {getLlama, readGgufFileInfo} = await import(pathToFileURL(entry).href);
const job = JSON.parse(fs.readFileSync(jobPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});

// {general: {architecture: "gpt2"}, ...} -> {"general.architecture": "gpt2", ...}; bigint -> number.
function flatten(obj, prefix, out) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? prefix + "." + k : k;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) flatten(v, key, out);
    else out[key] = Array.isArray(v) ? v.map(plain) : plain(v);
  }
  return out;
}
function plain(v) { return typeof v === "bigint" ? Number(v) : v; }

const results = [];
for (const m of job.models) {
  const info = await readGgufFileInfo(m.path, {readTensorInfo: true, logWarnings: false});
  const r = {
    label: m.label,
    version: info.version,
    metadata: flatten(info.metadata, "", {}),
    tensors: (info.tensorInfo ?? []).map((t) => ({
      name: t.name, dimensions: t.dimensions.map(plain), ggmlType: t.ggmlType,
    })),
    tokens: [],
    generated: [],
    probabilities: [],
  };
  const model = await llama.loadModel({modelPath: m.path, gpuLayers: 0});
  for (const text of m.texts) r.tokens.push(Array.from(model.tokenize(text, false)));
  if (m.generate) {
    const context = await model.createContext({
      contextSize: model.trainContextSize, batchSize: model.trainContextSize, sequences: 1,
      threads: 1, flashAttention: false,  // 1: spinning threads of a busy machine slow it 100x
      experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const sequence = context.getSequence();
    for (let i = 0; i < m.prompts.length; ++i) {
      await sequence.clearHistory();
      const out = [];
      if (m.n_new[i] > 0) {
        for await (const token of sequence.evaluate(m.prompts[i], {temperature: 0, yieldEogToken: true})) {
          out.push(token);
          if (out.length >= m.n_new[i]) break;
        }
      }
      r.generated.push(out);
      await sequence.clearHistory();
      const everyToken = {temperature: 1, topK: m.vocab_size, topP: 1, minP: 0,
        yieldEogToken: true};
      for await (const next of sequence.evaluateWithMetadata(m.prompts[i], {probabilities: true},
                                                             everyToken)) {
        const p = new Array(m.vocab_size).fill(0);
        for (const [token, prob] of next.probabilities) p[token] = prob;
        r.probabilities.push(p);
        break;
      }
    }
    await context.dispose();
  }
  await model.dispose();
  results.push(r);
}
process.stdout.write(JSON.stringify({models: results}));
