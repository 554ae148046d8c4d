// The real OpenAI Node.js client (npm "openai", pinned in package-lock.json)
// against the Corral gateway: models, chat completions streamed and not,
// with a key; no key, a revoked key, a key over its limit and one outside
// its scope get 401/401/429/403 in OpenAI's error shape. Prints the usage
// the client received ("usage PROMPT COMPLETION") for the caller to check
// against the gateway's counters. Env: GW_URL, KEY, REVOKED, LIMITED, SCOPED.
import OpenAI from "openai";
import assert from "node:assert/strict";

const baseURL = `${process.env.GW_URL}/v1`;
const client = (apiKey, extra = {}) => new OpenAI({ apiKey, baseURL, maxRetries: 0, ...extra });
const ok = client(process.env.KEY);
let prompt = 0, completion = 0;

const models = await ok.models.list();
const ids = models.data.map((m) => m.id).sort();
assert.deepEqual(ids, ["llama", "llama-8b"], `models: ${ids}`);
assert.equal(models.data[0].object, "model");

const chat = await ok.chat.completions.create({
  model: "llama",
  messages: [{ role: "user", content: "Say hello" }],
});
assert.equal(chat.choices[0].message.content, "hello from A");
assert.ok(chat.usage.prompt_tokens > 0 && chat.usage.completion_tokens === 3, JSON.stringify(chat.usage));
prompt += chat.usage.prompt_tokens;
completion += chat.usage.completion_tokens;

const stream = await ok.chat.completions.create({
  model: "llama-8b",
  messages: [{ role: "user", content: "Stream hello" }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = "", usage = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(text, "hello from A");
assert.ok(usage && usage.completion_tokens === 3, `stream usage: ${JSON.stringify(usage)}`);
prompt += usage.prompt_tokens;
completion += usage.completion_tokens;

// expect(promise, status, code): an APIError with OpenAI's error shape.
async function expectError(p, status, code, type) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, `status ${e.status}: ${e.message}`);
    assert.equal(e.code, code, `code ${e.code}`);
    assert.equal(e.type, type, `type ${e.type}`);
    assert.ok(e.error && typeof e.error.message === "string", "error.message");
    return e;
  }
  assert.fail(`want ${status} ${code}, the request succeeded`);
}
const req = { model: "llama", messages: [{ role: "user", content: "x" }] };

// No key: the client always sends one, so drop the header on the way out.
const nokey = client("unused", {
  fetch: (url, init) => {
    const h = new Headers(init.headers);
    h.delete("authorization");
    return fetch(url, { ...init, headers: h });
  },
});
await expectError(nokey.chat.completions.create(req), 401, "missing_api_key", "authentication_error");
await expectError(client(process.env.REVOKED).chat.completions.create(req), 401, "invalid_api_key",
  "authentication_error");
await expectError(client("crk_malformed").models.list(), 401, "invalid_api_key", "authentication_error");
await expectError(client(process.env.SCOPED).chat.completions.create(req), 403, "model_not_permitted",
  "permission_error");
await expectError(ok.chat.completions.create({ ...req, model: "gpt-9" }), 404, "model_not_found",
  "not_found_error");
await expectError(ok.chat.completions.create({ messages: req.messages }), 400, "model_required",
  "invalid_request_error");
// over its limit (1 request/s, a burst of 1): the second at once is 429
const limited = client(process.env.LIMITED);
const first = await limited.chat.completions.create(req);
prompt += first.usage.prompt_tokens;
completion += first.usage.completion_tokens;
const e = await expectError(limited.chat.completions.create(req), 429, "rate_limit_exceeded",
  "rate_limit_error");
assert.ok(Number(e.headers.get("retry-after")) >= 1, "Retry-After");
console.log(`usage ${prompt} ${completion}`);
console.log("openai client ok");
