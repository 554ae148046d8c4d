// The real OpenAI Node.js client over https (test_tls.sh): the gateway's
// certificate verified against the test's CA (NODE_EXTRA_CA_CERTS), models
// listed and a chat completion run, streamed and not. Env: GW_URL.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ apiKey: "unused", baseURL: `${process.env.GW_URL}/v1`, maxRetries: 0 });
const models = await client.models.list();
assert.deepEqual(models.data.map((m) => m.id), ["llama"]);
const chat = await client.chat.completions.create({
  model: "llama",
  messages: [{ role: "user", content: "Say hello" }],
});
assert.equal(chat.choices[0].message.content, "hello from A");
const stream = await client.chat.completions.create({
  model: "llama",
  messages: [{ role: "user", content: "Stream hello" }],
  stream: true,
});
let text = "";
for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
assert.equal(text, "hello from A");
console.log("openai over https ok");
