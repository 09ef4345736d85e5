// A JavaScript test's view of the control API: inject an error through HTTP, produce with kafkajs (whose retry
// must get past it), then ask the broker what it received and stored. Prints one line: RESULT <json>.
// Usage: node control_from_node.js <bootstrap host:port> <control URL> <topic>   (NODE_PATH: kafkajs)
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, control, topic] = process.argv.slice(2);

async function call(method, path, body) {
  const response = await fetch(control + path, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${answer.error}`);
  return answer;
}

async function main() {
  await call("POST", "/topics", { name: topic, partitions: 1 });
  await call("POST", "/faults/errors", { api: "Produce", error: "NOT_LEADER_OR_FOLLOWER", count: 2 });
  const kafka = new Kafka({ clientId: "js-test", brokers: [bootstrap], logLevel: logLevel.NOTHING,
                            retry: { initialRetryTime: 50, retries: 5 } });
  const producer = kafka.producer();
  await producer.connect();
  const [sent] = await producer.send({ topic, acks: -1, messages: [{ key: "k", value: "from-js" }] });
  await producer.disconnect();
  const produces = await call("GET", `/requests?api=Produce`);
  const records = await call("GET", `/records?topic=${encodeURIComponent(topic)}&partition=0`);
  console.log("RESULT " + JSON.stringify({
    offset: sent.baseOffset,
    injected: produces.map((entry) => entry.injected_error),
    clients: [...new Set(produces.map((entry) => entry.client_id))],
    values: records.map((record) => Buffer.from(record.value, "base64").toString()),
  }));
}

main().catch((error) => { console.log("ERROR " + error.message); process.exit(1); });
