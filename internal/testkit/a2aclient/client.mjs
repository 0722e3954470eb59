// Drives an A2A server with the official JavaScript SDK's client
// (@a2a-js/sdk): finds the agent by its card at BASE, then sends a
// message, streams one, has one wait for an approval, reads that task
// again, and answers it. It prints what happened as JSON, for a Go test to
// judge (internal/testkit/a2aclient).
//
//	node client.mjs BASE
import { ClientFactory } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const base = process.argv[2];
const out = {};
const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const state = (task) => TaskState[task?.status?.state] ?? String(task?.status?.state);
const lastArtifact = (task) => text(task?.artifacts?.at(-1)?.parts);
const message = (id, parts, extra = {}) => ({ messageId: id, role: Role.ROLE_USER, parts, ...extra });
const textPart = (value) => ({ content: { $case: "text", value } });
// A blocking send answers with a task, or a message.
const taskOf = (result) => result?.payload?.$case === "task" ? result.payload.value : result?.task ?? result;

try {
	const client = await new ClientFactory().createFromUrl(base);
	out.protocolVersion = client.transport?.protocolVersion ?? null;

	const hello = taskOf(await client.sendMessage({ message: message("js-1", [textPart("Hello from JavaScript")]) }));
	out.blocking = { state: state(hello), answer: lastArtifact(hello), contextId: hello.contextId };

	const kinds = [];
	let streamed = "";
	let final = "";
	for await (const ev of client.sendMessageStream({ message: message("js-2", [textPart("And streamed")], { contextId: hello.contextId }) })) {
		const c = ev?.payload?.$case ?? Object.keys(ev ?? {})[0];
		kinds.push(c);
		const v = ev?.payload?.value ?? ev;
		if (c === "artifactUpdate") streamed += text(v.artifact?.parts);
		if (c === "statusUpdate") final = TaskState[v.status?.state] ?? String(v.status?.state);
	}
	out.streamed = { kinds, final, text: streamed };

	const paused = taskOf(await client.sendMessage({ message: message("js-3", [textPart("What is 120*1.2?")]) }));
	const data = paused.status?.message?.parts?.find((p) => p.content?.$case === "data")?.content?.value;
	out.paused = { state: state(paused), interrupts: data?.interrupts ?? null };
	const got = await client.getTask({ id: paused.id });
	out.got = { state: state(got) };
	const answered = taskOf(await client.sendMessage({
		message: message("js-4", [{ content: { $case: "data", value: { responses: [{ interrupt_id: data?.interrupts?.[0]?.id, approve: true }] } } }], { taskId: paused.id, contextId: paused.contextId }),
	}));
	out.answered = { state: state(answered), answer: lastArtifact(answered), sameTask: answered.id === paused.id };
} catch (e) {
	out.error = String(e?.stack ?? e);
}
process.stdout.write(JSON.stringify(out));
