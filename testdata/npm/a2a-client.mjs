// Drives harnessd's A2A agent with the official A2A client (@a2a-js/sdk),
// for a2a_sdk_test.go. Usage:
//
//   A2A_TOKEN=<api key> node a2a-client.mjs http://127.0.0.1:PORT
//
// It fetches the agent card, sends a message, streams the answer in the
// same context, answers an input-required approval, cancels a task, and
// writes one JSON line per step to stdout for the test to check. Any
// failure exits 1 with the reason on stderr.
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const base = process.argv[2];
const token = process.env.A2A_TOKEN ?? "";

// The SDK's TaskState and Role enums, as numbers in its objects.
const states = { 1: "submitted", 2: "working", 3: "completed", 4: "failed", 5: "canceled", 6: "input-required" };
const ROLE_USER = 1;

// fetchImpl sends the bearer key with every request.
function fetchImpl(url, init = {}) {
  const headers = new Headers(init.headers);
  if (token) headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
}

function report(step, fields) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + "\n");
}

function userMessage(text, extra = {}) {
  return {
    messageId: crypto.randomUUID(),
    role: ROLE_USER,
    parts: [{ content: { $case: "text", value: text } }],
    ...extra,
  };
}

function textOf(parts) {
  return (parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("");
}

function outputOf(task) {
  const artifact = (task.artifacts ?? []).find((a) => a.artifactId === "output");
  return artifact ? textOf(artifact.parts) : "";
}

function factory(clientConfig) {
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    clientConfig,
  });
}

async function main() {
  const card = await new DefaultAgentCardResolver({ fetchImpl }).resolve(base);
  report("card", {
    name: card.name,
    url: card.supportedInterfaces?.[0]?.url,
    version: card.supportedInterfaces?.[0]?.protocolVersion,
    streaming: card.capabilities?.streaming,
    push: card.capabilities?.pushNotifications,
    skills: (card.skills ?? []).map((s) => s.id),
    schemes: Object.keys(card.securitySchemes ?? {}),
  });
  const client = await factory().createFromUrl(base);

  // Send a message: the blocking default waits for the task to end.
  const first = await client.sendMessage({ message: userMessage("first question") });
  report("send", { id: first.id, contextId: first.contextId, state: states[first.status?.state], output: outputOf(first) });

  // Stream the answer to a second message in the same context.
  const kinds = [];
  let streamed = "";
  let final = "";
  let streamTask = "";
  for await (const event of client.sendMessageStream({ message: userMessage("second question", { contextId: first.contextId }) })) {
    const { $case, value } = event.payload ?? {};
    if ($case === "task") {
      streamTask = value.id;
      kinds.push("task");
    } else if ($case === "artifactUpdate") {
      if (value.lastChunk) {
        final = textOf(value.artifact.parts);
        kinds.push("artifact.last");
      } else {
        streamed = value.append ? streamed + textOf(value.artifact.parts) : textOf(value.artifact.parts);
        kinds.push("artifact");
      }
    } else if ($case === "statusUpdate") {
      kinds.push(states[value.status?.state]);
    }
  }
  const streamedTask = await client.getTask({ id: streamTask, historyLength: 10 });
  report("stream", { id: streamTask, contextId: streamedTask.contextId, kinds, streamed, final, history: streamedTask.history.length });

  // A task that needs an approval: input-required, then answered.
  const waiting = await client.sendMessage({ message: userMessage("echo hello") });
  const question = textOf(waiting.status?.message?.parts);
  const answered = await client.sendMessage({ message: userMessage("approve", { taskId: waiting.id, contextId: waiting.contextId }) });
  report("approval", { id: waiting.id, waiting: states[waiting.status?.state], question, answeredId: answered.id, state: states[answered.status?.state], output: outputOf(answered) });

  // Cancel a task while its answer streams: the stream ends canceled.
  const cancelKinds = [];
  let canceled = null;
  let cancelTask = "";
  for await (const event of client.sendMessageStream({ message: userMessage("hang") })) {
    const { $case, value } = event.payload ?? {};
    if ($case === "task") {
      cancelTask = value.id;
      cancelKinds.push("task");
    } else if ($case === "artifactUpdate") {
      cancelKinds.push("artifact");
      if (!canceled) canceled = await client.cancelTask({ id: cancelTask });
    } else if ($case === "statusUpdate") {
      cancelKinds.push(states[value.status?.state]);
    }
  }
  let again = "";
  try {
    await client.cancelTask({ id: cancelTask });
  } catch (err) {
    again = err.name;
  }
  report("cancel", { id: cancelTask, kinds: cancelKinds, state: states[canceled?.status?.state], again });
}

main().catch((err) => {
  process.stderr.write(`a2a-client.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
