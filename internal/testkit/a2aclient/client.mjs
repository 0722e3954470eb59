// Drives an A2A server with the official JavaScript SDK's client
// (@a2a-js/sdk): finds the agent by its card at BASE, then, in the
// scenario "tasks" (the default), sends a message, streams one, has one
// wait for an approval, reads that task again, and answers it; in
// "cancel", cancels a task that waits for an approval, reads it again,
// and makes the calls the server refuses. It prints what happened as
// JSON, for a Go test to judge (internal/testkit/a2aclient).
//
//	node client.mjs BASE [tasks|cancel]
import { ClientFactory } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const base = process.argv[2];
const scenario = process.argv[3] ?? "tasks";
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
	if (scenario === "cancel") {
		await cancel(client);
	} else {
		await tasks(client);
	}
} catch (e) {
	out.error = String(e?.stack ?? e);
}
process.stdout.write(JSON.stringify(out));

// refusal is how a call failed: the SDK's error class and name, the
// JSON-RPC code, and the code our server puts in the error's data.
async function refusal(call) {
	try {
		await call();
		return { class: "", name: "no error" };
	} catch (e) {
		const ours = (Array.isArray(e?.data) ? e.data : []).find((d) => typeof d?.code === "string");
		return { class: e?.constructor?.name ?? "", name: e?.name ?? String(e), envelopeCode: e?.envelopeCode ?? 0, code: ours?.code ?? "" };
	}
}

async function cancel(client) {
	const done = taskOf(await client.sendMessage({ message: message("js-c1", [textPart("Hello")]) }));
	const paused = taskOf(await client.sendMessage({ message: message("js-c2", [textPart("What is 2*21?")]) }));
	const canceled = await client.cancelTask({ id: paused.id });
	const got = await client.getTask({ id: paused.id });
	out.cancel = {
		paused: state(paused),
		canceled: state(canceled),
		got: state(got),
		refusals: {
			cancelAgain: await refusal(() => client.cancelTask({ id: paused.id })),
			cancelCompleted: await refusal(() => client.cancelTask({ id: done.id })),
			getUnknown: await refusal(() => client.getTask({ id: "no-such-task" })),
			agentRole: await refusal(() => client.sendMessage({ message: { ...message("js-c3", [textPart("hi")]), role: Role.ROLE_AGENT } })),
			urlPart: await refusal(() => client.sendMessage({ message: message("js-c4", [{ content: { $case: "url", value: "http://169.254.169.254/" }, mediaType: "text/plain" }]) })),
			returnImmediately: await refusal(() => client.sendMessage({ message: message("js-c5", [textPart("hi")]), configuration: { returnImmediately: true } })),
		},
	};
}

async function tasks(client) {

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
}
