'use strict';
/*
 * The v5 conformance matrix, run by the official RocketMQ 5 Node.js client
 * (npm rocketmq-client-nodejs, at the version package-lock.json pins), unmodified.
 *
 *   node tests/conformance/v5_nodejs/runner.js '<spec json>'
 *
 * The spec names the scenario, one broker's apache.rocketmq.v2 endpoint, the topic and the
 * consumer group (both created beforehand), the credentials, whether to use TLS, the message
 * count of the volume scenarios and the scenario's time bound (deadline_s). The scenarios and
 * the fields each one reports are those of the matrix's contract, the same for every runner:
 *
 *   send_normal, send_fifo, send_delay, transaction, simple_ack, change_invisible,
 *   push_retry_dlq, push_fifo, filter_tag, filter_sql, new_group, two_brokers,
 *   volume_simple, volume_push, acl_tls
 *
 * Output: the last stdout line is one JSON object, the scenario's fields plus "error" (the
 * first failure as "<Type>: <message>", or null). The exit status is 0 whenever that line
 * was printed, failed scenario or not; 2 means the spec itself was unusable. A scenario is
 * bounded by deadline_s: past it the runner stops waiting, shuts every client down (each
 * within SHUTDOWN_MS), reports what it got and exits; a watchdog reports and exits at
 * deadline_s + 20 s whatever happens.
 *
 * Logs: the client's own logger (egg-logger) writes to $HOME/logs/rocketmq/, never to stdout
 * (its console transport is off: EGG_LOG is forced to NONE below); the clients are given a
 * logger that writes warnings and errors to stderr (everything with V5_RUNNER_VERBOSE=1).
 *
 * TLS: the client connects with grpc-js's ChannelCredentials.createSsl() and no roots of its
 * own. grpc-js then trusts exactly the PEM file GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names (it
 * replaces Node's roots), so that is the variable to point at a cluster's CA: checked
 * against `rocketq cluster up --auth --tls --grpc`, whose certificate names 127.0.0.1.
 * NODE_EXTRA_CA_CERTS works only while GRPC_DEFAULT_SSL_ROOTS_FILE_PATH is unset (Node's
 * roots are used then, which it extends); where that variable names the system bundle, as
 * it often does, a CA in NODE_EXTRA_CA_CERTS alone is ignored ("unable to verify the first
 * certificate").
 */

process.env.EGG_LOG = 'NONE';

const util = require('node:util');
const { performance } = require('node:perf_hooks');
const {
  Producer, SimpleConsumer, PushConsumer, FilterExpression, ConsumeResult,
} = require('rocketmq-client-nodejs');
const { FilterType, TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const clientVersion = require('rocketmq-client-nodejs/package.json').version;

const T0 = performance.now();
const SHUTDOWN_MS = 5000; // per client; a PushConsumer otherwise waits out its long polls
const REQUEST_TIMEOUT_MS = 10000; // the client's default (3 s) is short for a busy 2-core machine
const AWAIT_MS = 5000; // SimpleConsumer long polling
const INVISIBLE_MS = 30000;
const BATCH = 32;
const MAX_IN_FLIGHT = 64; // volume sends

// ------------------------------------------------------------------ spec

const SCENARIOS = {
  send_normal: sendNormal,
  send_fifo: sendFifo,
  send_delay: sendDelay,
  transaction,
  simple_ack: simpleAck,
  change_invisible: changeInvisible,
  push_retry_dlq: pushRetryDlq,
  push_fifo: pushFifo,
  filter_tag: filterTag,
  filter_sql: filterSql,
  new_group: newGroup,
  two_brokers: twoBrokers,
  volume_simple: volumeSimple,
  volume_push: volumePush,
  acl_tls: aclTls,
};

function badSpec(why) {
  process.stderr.write(`bad spec: ${why}\n`);
  process.exit(2);
}

function parseSpec(text) {
  let spec;
  try {
    spec = JSON.parse(text);
  } catch (err) {
    return badSpec(`argv[1] is not JSON (${err.message})`);
  }
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)) badSpec('not a JSON object');
  if (!Object.prototype.hasOwnProperty.call(SCENARIOS, spec.scenario)) {
    badSpec(`scenario ${JSON.stringify(spec.scenario)} is none of ${Object.keys(SCENARIOS).join(', ')}`);
  }
  for (const key of [ 'endpoint', 'topic', 'group' ]) {
    if (typeof spec[key] !== 'string' || spec[key] === '') badSpec(`${key} must be a non-empty string`);
  }
  for (const key of [ 'ak', 'sk' ]) {
    if (spec[key] === undefined || spec[key] === null) spec[key] = '';
    if (typeof spec[key] !== 'string') badSpec(`${key} must be a string`);
  }
  if (spec.tls === undefined) spec.tls = false;
  if (typeof spec.tls !== 'boolean') badSpec('tls must be a boolean');
  if (spec.count === undefined) spec.count = 0;
  if (!Number.isInteger(spec.count) || spec.count < 0) badSpec('count must be a non-negative integer');
  if (typeof spec.deadline_s !== 'number' || !(spec.deadline_s > 0)) badSpec('deadline_s must be a positive number');
  return spec;
}

const spec = parseSpec(process.argv[2]);
const DEADLINE = T0 + spec.deadline_s * 1000;

// ------------------------------------------------------------------ helpers

const nowS = () => (performance.now() - T0) / 1000;
const remainingMs = () => DEADLINE - performance.now();
const sleep = ms => new Promise(resolve => setTimeout(resolve, Math.max(0, ms)));
const round3 = x => Math.round(x * 1000) / 1000;

const VERBOSE = process.env.V5_RUNNER_VERBOSE === '1';
function logLine(level, args) {
  process.stderr.write(`[${nowS().toFixed(3)}] ${level} ${util.format(...args)}\n`);
}
const clientLogger = {
  info: (...args) => VERBOSE && logLine('INFO', args),
  debug: (...args) => VERBOSE && logLine('DEBUG', args),
  warn: (...args) => logLine('WARN', args),
  error: (...args) => logLine('ERROR', args),
  close: () => {},
};

/** "<Type>: <message>", with the causes the client chains (a failed start-up hides its reason there). */
function errorText(err) {
  if (!(err instanceof Error)) return `Error: ${String(err)}`;
  let text = `${err.name || 'Error'}: ${err.message}`;
  if (err.code !== undefined && !String(err.message).includes(String(err.code))) text += ` (code ${err.code})`;
  let cause = err.cause;
  for (let depth = 0; cause && depth < 4; depth++) {
    const message = cause instanceof Error ? cause.message : String(cause);
    if (!text.includes(message)) text += `; caused by ${cause instanceof Error ? cause.name : 'Error'}: ${message}`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}

class Timeout extends Error {
  constructor(message) {
    super(message);
    this.name = 'Timeout';
  }
}

/** The promise, or a Timeout once the scenario's deadline passes. */
function bounded(promise, what) {
  let timer;
  const expiry = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Timeout(`${what}: deadline of ${spec.deadline_s} s passed`)), Math.max(0, remainingMs()));
  });
  return Promise.race([ promise, expiry ]).finally(() => clearTimeout(timer));
}

const out = { scenario: spec.scenario, client: 'rocketmq-client-nodejs', client_version: clientVersion, error: null };
function fail(err) {
  if (out.error === null) out.error = errorText(err);
}

const clients = [];

function baseOptions(sk = spec.sk) {
  const options = {
    endpoints: spec.endpoint,
    namespace: '',
    sslEnabled: spec.tls,
    requestTimeout: REQUEST_TIMEOUT_MS,
    logger: clientLogger,
  };
  if (spec.ak) options.sessionCredentials = { accessKey: spec.ak, accessSecret: sk };
  return options;
}

async function startClient(client, what) {
  clients.push(client);
  await bounded(client.startup(), `${what} start-up`);
  return client;
}

function startProducer(extra = {}, sk = spec.sk) {
  return startClient(new Producer({ ...baseOptions(sk), topics: [ spec.topic ], ...extra }), 'producer');
}

function startSimple(filter = '*', awaitMs = AWAIT_MS) {
  return startClient(new SimpleConsumer({
    ...baseOptions(),
    consumerGroup: spec.group,
    subscriptions: new Map([[ spec.topic, filter ]]),
    awaitDuration: awaitMs,
  }), 'simple consumer');
}

function startPush(consume) {
  return startClient(new PushConsumer({
    ...baseOptions(),
    consumerGroup: spec.group,
    subscriptions: new Map([[ spec.topic, '*' ]]),
    messageListener: { consume },
  }), 'push consumer');
}

const optional = value => (value === undefined || value === '' ? null : value);

/** A received message as the contract's "view". */
function view(m) {
  return {
    body: m.body.toString('utf8'),
    id: m.messageId,
    topic: m.topic,
    tag: optional(m.tag),
    keys: [ ...m.keys ],
    props: Object.fromEntries(m.properties),
    group: optional(m.messageGroup),
    attempt: m.deliveryAttempt === undefined ? null : m.deliveryAttempt,
    born_host: optional(m.bornHost),
    born_ms: m.bornTimestamp ? m.bornTimestamp.getTime() : null,
    delivery_ms: m.deliveryTimestamp ? m.deliveryTimestamp.getTime() : null,
    corrupted: m.corrupted === true,
    at_s: round3(nowS()),
  };
}

function message(body, extra = {}) {
  return { topic: spec.topic, body: Buffer.from(body, 'utf8'), ...extra };
}

async function send(producer, body, extra = {}, transaction) {
  const receipt = await bounded(producer.send(message(body, extra), transaction), `send ${body}`);
  return { body, id: receipt.messageId };
}

/** One receive(32, invisible) call; acknowledges what came unless told not to. */
async function receiveOnce(consumer, { ack = true, invisibleMs = INVISIBLE_MS, batch = BATCH } = {}) {
  const messages = await bounded(consumer.receive(batch, invisibleMs), 'receive');
  const views = messages.map(view);
  if (ack) await bounded(Promise.all(messages.map(m => consumer.ack(m))), 'ack');
  return { messages, views };
}

/**
 * Receive until done() holds; every view goes into got. Past the deadline this throws a
 * Timeout naming what was still missing (what() describes it).
 */
async function receiveUntil(consumer, got, done, what, options = {}) {
  const expired = () => new Timeout(`${what()}: deadline of ${spec.deadline_s} s passed`);
  while (!done()) {
    if (remainingMs() <= 0) throw expired();
    try {
      const { views } = await receiveOnce(consumer, options);
      got.push(...views);
    } catch (err) {
      throw err instanceof Timeout ? expired() : err;
    }
  }
}

const bodiesOf = views => views.map(v => v.body);
function missingOf(wanted, views) {
  const have = new Set(bodiesOf(views));
  return wanted.filter(b => !have.has(b));
}
function untilAll(wanted, got) {
  return [ () => missingOf(wanted, got).length === 0,
    () => `still missing ${JSON.stringify(missingOf(wanted, got).slice(0, 10))}` ];
}
const range = (n, f) => Array.from({ length: n }, (_x, i) => f(i));

// ------------------------------------------------------------------ scenarios

async function sendNormal() {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple() ]);
  out.sent = [];
  for (let i = 0; i < 20; i++) {
    out.sent.push(await send(producer, `n-${i}`, {
      tag: 'TagA', keys: [ `k-${i}` ], properties: new Map([[ 'origin', 'v5' ]]),
    }));
  }
  out.got = [];
  await receiveUntil(consumer, out.got, ...untilAll(bodiesOf(out.sent), out.got));
  out.after_ack = bodiesOf((await receiveOnce(consumer)).views);
}

async function sendFifo() {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple() ]);
  out.sent = [];
  for (let i = 0; i < 10; i++) {
    out.sent.push(await send(producer, `a-${i}`, { messageGroup: 'g1' }));
    out.sent.push(await send(producer, `b-${i}`, { messageGroup: 'g2' }));
  }
  out.got = [];
  await receiveUntil(consumer, out.got, ...untilAll(bodiesOf(out.sent), out.got));
}

async function sendDelay() {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple() ]);
  out.sent_at_s = round3(nowS());
  out.sent = [ await send(producer, 'later', { deliveryTimestamp: new Date(Date.now() + 3000) }) ];
  out.sent.push(await send(producer, 'now'));
  out.got = [];
  await receiveUntil(consumer, out.got, ...untilAll([ 'later', 'now' ], out.got));
}

async function transaction() {
  out.checked_calls = 0;
  const checker = {
    async check() {
      out.checked_calls += 1;
      return TransactionResolution.COMMIT;
    },
  };
  const [ producer, consumer ] = await Promise.all([ startProducer({ checker }), startSimple() ]);
  const committed = producer.beginTransaction();
  await send(producer, 'committed', {}, committed);
  await bounded(committed.commit(), 'commit');
  const rolledBack = producer.beginTransaction();
  await send(producer, 'rolled-back', {}, rolledBack);
  await bounded(rolledBack.rollback(), 'rollback');
  await send(producer, 'checked', {}, producer.beginTransaction());
  const got = [];
  Object.defineProperty(out, 'bodies', { get: () => bodiesOf(got), enumerable: true });
  await receiveUntil(consumer, got, ...untilAll([ 'committed', 'checked' ], got));
  got.push(...(await receiveOnce(consumer)).views);
}

async function simpleAck() {
  // The last receive waits 3 s; a SimpleConsumer's long polling is set at construction, so a
  // second consumer of the group, started beside the first, makes it.
  const [ producer, consumer, shortPoll ] = await Promise.all([ startProducer(), startSimple(), startSimple('*', 3000) ]);
  const wanted = range(5, i => `s-${i}`);
  for (const body of wanted) await send(producer, body);
  const got = [];
  Object.defineProperty(out, 'first', { get: () => bodiesOf(got), enumerable: true });
  await receiveUntil(consumer, got, ...untilAll(wanted, got));
  out.after_ack = bodiesOf((await receiveOnce(shortPoll)).views);
}

/** Receives (acknowledging nothing) until a message with this body comes. */
async function receiveBody(consumer, body, what) {
  const expired = () => new Timeout(`${what}: deadline of ${spec.deadline_s} s passed`);
  for (;;) {
    if (remainingMs() <= 0) throw expired();
    let received;
    try {
      received = await receiveOnce(consumer, { ack: false });
    } catch (err) {
      throw err instanceof Timeout ? expired() : err;
    }
    const i = received.views.findIndex(v => v.body === body);
    if (i >= 0) return { message: received.messages[i], view: received.views[i] };
  }
}

async function changeInvisible() {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple() ]);
  await send(producer, 'again');
  const first = await receiveBody(consumer, 'again', "'again' never came");
  out.first = first.view;
  await bounded(consumer.changeInvisibleDuration(first.message, 2000), 'change invisible duration');
  const second = await receiveBody(consumer, 'again', "'again' did not come back");
  out.second = second.view;
  out.gap_s = round3(out.second.at_s - out.first.at_s);
  await bounded(consumer.ack(second.message), 'ack');
}

/** Runs a PushConsumer until done() holds, then `linger` ms more. */
async function runPush(consume, done, what, linger) {
  await startPush(consume);
  while (!done()) {
    if (remainingMs() <= 0) throw new Timeout(`${what()}: deadline of ${spec.deadline_s} s passed`);
    await sleep(Math.min(100, remainingMs()));
  }
  await sleep(Math.min(linger, remainingMs()));
}

async function pushRetryDlq() {
  const producer = await startProducer();
  for (const body of [ 'ok-1', 'fail-once', 'fail-always', 'ok-2' ]) await send(producer, body);
  out.seen = [];
  const count = body => out.seen.filter(s => s[0] === body).length;
  const consume = m => {
    const body = m.body.toString('utf8');
    out.seen.push([ body, m.deliveryAttempt === undefined ? null : m.deliveryAttempt ]);
    if (body === 'fail-always' || (body === 'fail-once' && count('fail-once') === 1)) return ConsumeResult.FAILURE;
    return ConsumeResult.SUCCESS;
  };
  const done = () => count('fail-once') >= 2 && count('fail-always') >= 3 && count('ok-1') >= 1 && count('ok-2') >= 1;
  await runPush(consume, done, () => `seen ${JSON.stringify(out.seen)}`, 3000);
}

async function pushFifo() {
  const producer = await startProducer();
  for (let i = 0; i < 6; i++) await send(producer, `p-${i}`, { messageGroup: 'g1' });
  out.seen = [];
  const consume = m => {
    const body = m.body.toString('utf8');
    out.seen.push([ body, m.deliveryAttempt === undefined ? null : m.deliveryAttempt ]);
    return body === 'p-2' ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
  };
  const done = () => out.seen.some(s => s[0] === 'p-5');
  await runPush(consume, done, () => `p-5 not seen, seen ${JSON.stringify(out.seen)}`, 2000);
}

async function filtered(filter, messages, wanted) {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple(filter) ]);
  for (const [ body, extra ] of messages) await send(producer, body, extra);
  const got = [];
  Object.defineProperty(out, 'bodies', { get: () => bodiesOf(got), enumerable: true });
  await receiveUntil(consumer, got, ...untilAll(wanted, got));
  got.push(...(await receiveOnce(consumer)).views);
}

function filterTag() {
  return filtered(new FilterExpression('TagA||TagB', FilterType.TAG), [
    [ 'ta', { tag: 'TagA' } ], [ 'tb', { tag: 'TagB' } ], [ 'tc', { tag: 'TagC' } ], [ 'ta2', { tag: 'TagA' } ],
  ], [ 'ta', 'tb', 'ta2' ]);
}

function filterSql() {
  const props = (color, n) => ({ properties: new Map([[ 'color', color ], [ 'n', String(n) ]]) });
  return filtered(new FilterExpression("color = 'red' AND n > 2", FilterType.SQL), [
    [ 'r1', props('red', 1) ], [ 'r3', props('red', 3) ], [ 'b5', props('blue', 5) ], [ 'r7', props('red', 7) ],
  ], [ 'r3', 'r7' ]);
}

async function newGroup() {
  const producer = await startProducer();
  out.sent = [];
  for (let i = 0; i < 5; i++) out.sent.push(await send(producer, `ng-${i}`));
  const consumer = await startSimple();
  const got = [];
  Object.defineProperty(out, 'bodies', { get: () => bodiesOf(got), enumerable: true });
  await receiveUntil(consumer, got, ...untilAll(bodiesOf(out.sent), got));
}

async function twoBrokers() {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple() ]);
  out.sent = [];
  for (let i = 0; i < 40; i++) out.sent.push(await send(producer, `tb-${i}`));
  const got = [];
  Object.defineProperty(out, 'bodies', { get: () => bodiesOf(got), enumerable: true });
  await receiveUntil(consumer, got, ...untilAll(bodiesOf(out.sent), got));
}

/** Sends `count` messages v-<i>, at most MAX_IN_FLIGHT at once; returns the bodies sent. */
async function sendVolume(producer) {
  const sent = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < spec.count && remainingMs() > 0) {
      const body = `v-${next++}`;
      try {
        await send(producer, body);
        sent.push(body);
      } catch (err) {
        fail(err);
      }
    }
  };
  await Promise.all(range(Math.min(MAX_IN_FLIGHT, spec.count), worker));
  out.sent_n = sent.length;
  out.send_s = round3((performance.now() - started) / 1000);
  return sent;
}

/** The volume fields from what arrived (bodies, in order, duplicates included). */
function volumeStats(sent, arrived) {
  const distinct = new Set(arrived);
  out.distinct = distinct.size;
  out.duplicates = arrived.length - distinct.size;
  out.missing = sent.filter(b => !distinct.has(b)).slice(0, 10);
}

async function volumeSimple() {
  const producer = await startProducer();
  const sent = await sendVolume(producer);
  const arrived = [];
  const distinct = new Set();
  out.receive_calls = 0;
  out.empty_receives = 0;
  const started = performance.now();
  try {
    const consumer = await startSimple();
    while (distinct.size < sent.length) {
      if (remainingMs() <= 0) throw new Timeout(`${sent.length - distinct.size} not received: deadline of ${spec.deadline_s} s passed`);
      out.receive_calls += 1;
      const messages = await bounded(consumer.receive(BATCH, 60000), 'receive');
      if (messages.length === 0) out.empty_receives += 1;
      for (const m of messages) {
        const body = m.body.toString('utf8');
        arrived.push(body);
        distinct.add(body);
      }
      await bounded(Promise.all(messages.map(m => consumer.ack(m))), 'ack');
    }
  } finally {
    out.drain_s = round3((performance.now() - started) / 1000);
    volumeStats(sent, arrived);
  }
}

async function volumePush() {
  const producer = await startProducer();
  const sent = await sendVolume(producer);
  const arrived = [];
  const distinct = new Set();
  let last = performance.now();
  const started = last;
  const consume = m => {
    const body = m.body.toString('utf8');
    arrived.push(body);
    if (!distinct.has(body)) {
      distinct.add(body);
      last = performance.now();
    }
    return ConsumeResult.SUCCESS;
  };
  try {
    await runPush(consume, () => distinct.size >= sent.length,
      () => `${sent.length - distinct.size} not consumed`, 0);
  } finally {
    out.drain_s = round3((last - started) / 1000);
    volumeStats(sent, arrived);
  }
}

async function aclTls() {
  const [ producer, consumer ] = await Promise.all([ startProducer(), startSimple() ]);
  out.sent = [ await send(producer, 'signed') ];
  const got = [];
  Object.defineProperty(out, 'bodies', { get: () => bodiesOf(got), enumerable: true });
  await receiveUntil(consumer, got, ...untilAll([ 'signed' ], got));
  out.forged_error = null;
  try {
    const forger = await startProducer({}, `${spec.sk}-wrong`);
    await send(forger, 'forged');
  } catch (err) {
    if (err instanceof Timeout) throw err;
    out.forged_error = errorText(err);
  }
}

// ------------------------------------------------------------------ run

async function shutdownAll() {
  await Promise.all(clients.map(client => {
    let timer;
    const expiry = new Promise(resolve => { timer = setTimeout(resolve, SHUTDOWN_MS); });
    const done = client.shutdown().catch(err => logLine('WARN', [ 'shutdown: %s', errorText(err) ]));
    return Promise.race([ done, expiry ]).finally(() => clearTimeout(timer));
  }));
}

let reported = false;
function report() {
  if (reported) return;
  reported = true;
  out.elapsed_s = round3(nowS());
  // A getter-backed field (bodies, first) is read here, with what arrived so far.
  const line = JSON.stringify(out);
  process.stdout.write(`\n${line}\n`, () => process.exit(0));
}

// Past the deadline the scenario is abandoned and the clients get SHUTDOWN_MS to stop; should
// anything still hold the process WATCHDOG_MS later, the report goes out regardless.
const WATCHDOG_MS = 20000;
setTimeout(() => {
  fail(new Timeout(`the runner was still busy ${WATCHDOG_MS / 1000} s after its deadline`));
  report();
}, spec.deadline_s * 1000 + WATCHDOG_MS).unref();

process.on('unhandledRejection', err => logLine('WARN', [ 'unhandled rejection: %s', errorText(err) ]));
process.on('uncaughtException', err => {
  fail(err);
  logLine('ERROR', [ 'uncaught exception: %s', err && err.stack ]);
  report();
});

(async () => {
  try {
    await bounded(SCENARIOS[spec.scenario](), spec.scenario);
  } catch (err) {
    fail(err);
  }
  await shutdownAll();
  report();
})();
