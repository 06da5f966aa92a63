'use strict';
/*
 * Conformance run of ali-ons (a stock RocketMQ 4.x client for Node.js) against a server.
 *
 *   node conformance.js NAMESRV SUFFIX
 *   ROCKETQ_NAMESRV=127.0.0.1:9876 CONFORMANCE_SUFFIX=run1 node conformance.js
 *
 * With CONFORMANCE_ACCESS_KEY and CONFORMANCE_SECRET_KEY set, ali-ons signs every request
 * (AccessKey, OnsChannel and Signature ext fields), as against a cluster with ACL on.
 *
 * NAMESRV may list several addresses separated by ';'. SUFFIX makes the topic and group
 * names unique to a run. The topics must exist before the run (ali-ons cannot create
 * them: a route lookup answered TOPIC_NOT_EXIST fails the send), each with 2 queues:
 *
 *   AliOns_SUFFIX        steps a, c, f      AliOnsSql_SUFFIX    step d
 *   AliOnsDelay_SUFFIX   step b             AliOnsRetry_SUFFIX  step e
 *
 * Steps, in the order they run, each bounded by CONFORMANCE_STEP_TIMEOUT_MS (30000):
 *   a_produce  N messages (CONFORMANCE_COUNT, 8) tagged TagA/TagB with two keys each, one
 *              TagC message and one 5000-byte TagA body (ali-ons compresses it);
 *   b_delay    a plain message, then one with delay level CONFORMANCE_DELAY_LEVEL (2),
 *              consumed by a fresh group; the time from send to consumption is printed;
 *   c_tags     a push consumer subscribed to "TagA || TagB" consumes a_produce's messages,
 *              then closes, which commits its offsets;
 *   d_sql92    a consumer subscribed with SQL92 "price >= 3" gets the matching messages,
 *              ending with a sentinel (all are sent to one queue, so the sentinel comes last);
 *   e_retry    a consumer throws on one message the first time: ali-ons sends it back and
 *              it returns through %RETRY%group with reconsume times 1;
 *   f_restart  group c starts again and 4 new messages are sent: only those may arrive.
 *
 * stdout gets one JSON object a line ("event": config, sent, consumed, send_back, feature,
 * step_done, failed, done); ali-ons's own warnings and the client errors go to stderr. The
 * exit status is 0 only when every step finished; on failure the last line is a "failed"
 * event naming the step and the reason.
 */

const crypto = require('crypto');
const { Producer, Consumer, Message } = require('ali-ons');
const aliOnsVersion = require('ali-ons/package.json').version;

const NAMESRV = process.argv[2] || process.env.ROCKETQ_NAMESRV;
const SUFFIX = process.argv[3] || process.env.CONFORMANCE_SUFFIX;
const COUNT = Number(process.env.CONFORMANCE_COUNT || 8);
const DELAY_LEVEL = Number(process.env.CONFORMANCE_DELAY_LEVEL || 2);
const STEP_TIMEOUT_MS = Number(process.env.CONFORMANCE_STEP_TIMEOUT_MS || 30000);
const ACCESS_KEY = process.env.CONFORMANCE_ACCESS_KEY || '';
const SECRET_KEY = process.env.CONFORMANCE_SECRET_KEY || '';

const TOPICS = {
  main: `AliOns_${SUFFIX}`,
  delay: `AliOnsDelay_${SUFFIX}`,
  sql: `AliOnsSql_${SUFFIX}`,
  retry: `AliOnsRetry_${SUFFIX}`,
};
const GROUPS = {
  producer: `ali_ons_pg_${SUFFIX}`,
  tags: `ali_ons_tags_${SUFFIX}`,
  delay: `ali_ons_delay_${SUFFIX}`,
  sql: `ali_ons_sql_${SUFFIX}`,
  retry: `ali_ons_retry_${SUFFIX}`,
};
const SQL_EXPRESSION = 'price >= 3';
const BIG_BODY = 'rocketq-ali-ons-'.repeat(313).slice(0, 5000); // over ali-ons's 4 KiB: compressed

// ------------------------------------------------------------------ output

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

let currentStep = 'start';
const clientErrors = []; // the last errors ali-ons emitted, for the failure message

function finish(code) {
  // stdout to a pipe is synchronous on Linux; exit once it is flushed all the same.
  process.stdout.write('', () => process.exit(code));
}

function fail(err) {
  const error = err && err.message ? err.message : String(err);
  emit({ event: 'failed', step: currentStep, error, client_errors: clientErrors.slice(-5) });
  process.stderr.write(`conformance step ${currentStep} failed: ${error}\n`);
  finish(1);
}

process.on('unhandledRejection', fail);
process.on('uncaughtException', fail);

// ------------------------------------------------------------------ waiting with deadlines

/** Resolve with `promise`, or reject naming `what` after `ms`. */
function bounded(promise, what, ms = STEP_TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms ${what}`)), ms);
  });
  return Promise.race([ promise, timeout ]).finally(() => clearTimeout(timer));
}

/** Messages a consumer received; `until` waits (bounded) for a condition over them. */
class Inbox {
  constructor() {
    this.items = [];
    this.waiters = [];
  }

  push(item) {
    this.items.push(item);
    this.waiters = this.waiters.filter(check => !check());
  }

  until(condition, what) {
    return bounded(new Promise(resolve => {
      const check = () => condition(this.items) && (resolve(this.items), true);
      if (!check()) this.waiters.push(check);
    }), `waiting for ${what} (got ${this.items.length})`);
  }
}

// ------------------------------------------------------------------ ali-ons clients

// ali-ons asserts an HTTP client even when nameSrv is given; with nameSrv it never calls it.
const noHttp = {
  request() {
    throw new Error('ali-ons asked the HTTP address server although nameSrv is set');
  },
};

// Without accessKey/secretKey ali-ons adds no AccessKey/Signature/OnsChannel fields.
// Shorter intervals than ali-ons's defaults (30 s routes and heartbeats, 10 s rebalance,
// 5 s offset commits) so that the retry topic's route, created by the first heartbeat,
// is picked up in about a second.
const COMMON = {
  nameSrv: NAMESRV ? NAMESRV.split(';').map(s => s.trim()).filter(Boolean) : [],
  httpclient: noHttp,
  pollNameServerInteval: 1000,
  heartbeatBrokerInterval: 1000,
  rebalanceInterval: 1000,
  persistConsumerOffsetInterval: 1000,
};
if (ACCESS_KEY) {
  COMMON.accessKey = ACCESS_KEY;
  COMMON.secretKey = SECRET_KEY;
}

function onClientError(who) {
  return err => {
    const line = `${who}: ${err && err.name}: ${err && err.message}`;
    clientErrors.push(line);
    process.stderr.write(`[ali-ons error] ${line}\n`);
  };
}

function newConsumer(group) {
  const consumer = new Consumer(Object.assign({}, COMMON, {
    consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  }));
  consumer.on('error', onClientError(`consumer ${group}`));
  return consumer;
}

/** The decoded properties, less the empty key ali-ons's parser makes of the trailing
 * separator and the MIN_OFFSET/MAX_OFFSET it copies in from the pull response. */
function userVisible(properties) {
  const out = {};
  for (const [ key, value ] of Object.entries(properties || {})) {
    if (key && key !== 'MIN_OFFSET' && key !== 'MAX_OFFSET') out[key] = value;
  }
  return out;
}

/** What the Python side checks of a received message. */
function describe(msg, step) {
  const body = msg.body ? Buffer.from(msg.body) : Buffer.alloc(0);
  return {
    event: 'consumed',
    step,
    topic: msg.topic,
    msg_id: msg.msgId,
    origin_msg_id: msg.originMessageId || null,
    keys: msg.keys ? msg.keys.split(' ') : [],
    tags: msg.tags || null,
    body: body.toString('utf8'),
    body_len: body.length,
    body_sha256: crypto.createHash('sha256').update(body).digest('hex'),
    body_crc: msg.bodyCRC,
    sys_flag: msg.sysFlag,
    reconsume_times: msg.reconsumeTimes,
    queue_id: msg.queueId,
    queue_offset: msg.queueOffset,
    commit_log_offset: msg.commitLogOffset,
    born_host: msg.bornHost,
    store_host: msg.storeHost,
    born_timestamp: msg.bornTimestamp,
    store_timestamp: msg.storeTimestamp,
    consumed_at_ms: Date.now(),
    properties: userVisible(msg.properties),
  };
}

/** Send one message and print what the broker answered. */
async function send(producer, step, { topic, tags, keys, body, delayLevel, properties, shardingKey }) {
  const msg = new Message(topic, tags, body);
  msg.keys = keys;
  if (delayLevel) msg.delayTimeLevel = delayLevel;
  if (shardingKey) msg.shardingKey = shardingKey;
  Object.assign(msg.properties, properties || {});
  const raw = Buffer.from(body);
  const sentAt = Date.now();
  const result = await bounded(producer.send(msg), `sending ${keys[0]} to ${topic}`);
  const event = {
    event: 'sent',
    step,
    topic,
    keys,
    tags,
    body: raw.toString('utf8'),
    body_len: raw.length,
    body_sha256: crypto.createHash('sha256').update(raw).digest('hex'),
    delay_level: delayLevel || 0,
    properties: properties || {},
    status: result.sendStatus,
    msg_id: result.msgId,
    broker_name: result.messageQueue.brokerName,
    queue_id: Number(result.messageQueue.queueId),
    queue_offset: result.queueOffset,
    sent_at_ms: sentAt,
  };
  emit(event);
  return event;
}

function keyOf(m) {
  return m.keys[0];
}

// ------------------------------------------------------------------ the steps

async function produceTagged(producer) {
  currentStep = 'a_produce';
  const sent = [];
  for (let i = 0; i < COUNT; i++) {
    sent.push(await send(producer, currentStep, {
      topic: TOPICS.main,
      tags: i % 2 ? 'TagB' : 'TagA',
      keys: [ `a-${i}`, `order-${i % 3}` ],
      body: `a-body-${i}`,
    }));
  }
  sent.push(await send(producer, currentStep, {
    topic: TOPICS.main, tags: 'TagC', keys: [ 'a-tagc' ], body: 'a-body-tagc',
  }));
  sent.push(await send(producer, currentStep, {
    topic: TOPICS.main, tags: 'TagA', keys: [ 'a-big' ], body: BIG_BODY,
  }));
  emit({ event: 'step_done', step: currentStep, sent: sent.length });
  return sent;
}

async function delayed(producer) {
  currentStep = 'b_delay';
  const inbox = new Inbox();
  const consumer = newConsumer(GROUPS.delay);
  consumer.subscribe(TOPICS.delay, '*', async msg => {
    const m = describe(msg, 'b_delay');
    emit(m);
    inbox.push(m);
  });
  await bounded(consumer.ready(), 'starting the delay consumer');
  const plain = await send(producer, currentStep, {
    topic: TOPICS.delay, tags: 'TagD', keys: [ 'b-now' ], body: 'b-body-now',
  });
  const later = await send(producer, currentStep, {
    topic: TOPICS.delay, tags: 'TagD', keys: [ 'b-delayed' ], body: 'b-body-delayed',
    delayLevel: DELAY_LEVEL,
  });
  await inbox.until(items => items.some(m => keyOf(m) === 'b-delayed'), 'the delayed message');
  const got = inbox.items.find(m => keyOf(m) === 'b-delayed');
  await bounded(consumer.close(), 'closing the delay consumer');
  emit({
    event: 'step_done',
    step: currentStep,
    delay_level: DELAY_LEVEL,
    plain_sent_at_ms: plain.sent_at_ms,
    sent_at_ms: later.sent_at_ms,
    consumed_at_ms: got.consumed_at_ms,
    elapsed_ms: got.consumed_at_ms - later.sent_at_ms,
  });
}

async function consumeTags(sent) {
  currentStep = 'c_tags';
  const expected = sent.filter(m => m.tags === 'TagA' || m.tags === 'TagB').map(keyOf);
  const inbox = new Inbox();
  const consumer = newConsumer(GROUPS.tags);
  consumer.subscribe(TOPICS.main, 'TagA || TagB', async msg => {
    const m = describe(msg, 'c_tags');
    emit(m);
    inbox.push(m);
  });
  await bounded(consumer.ready(), 'starting the tag consumer');
  await inbox.until(items => expected.every(k => items.some(m => keyOf(m) === k)),
    `the ${expected.length} TagA/TagB messages`);
  // close() commits the consumed offsets (UPDATE_CONSUMER_OFFSET) and unregisters.
  await bounded(consumer.close(), 'closing the tag consumer');
  emit({ event: 'step_done', step: currentStep, consumed: inbox.items.length });
}

async function sql92(producer) {
  currentStep = 'd_sql92';
  const consumer = newConsumer(GROUPS.sql);
  const selector = { expressionType: 'SQL92', subString: SQL_EXPRESSION };
  // ali-ons >= 3.10 passes an object selector through as expressionType + subString.
  const probe = consumer.buildSubscriptionData(GROUPS.sql, TOPICS.sql, selector);
  const supported = probe.expressionType === 'SQL92';
  emit({ event: 'feature', step: currentStep, feature: 'sql92', supported, expression: SQL_EXPRESSION });
  if (!supported) {
    await bounded(consumer.close(), 'closing the SQL92 consumer');
    emit({ event: 'step_done', step: currentStep, skipped: 'SQL92 unsupported by this ali-ons' });
    return;
  }
  const inbox = new Inbox();
  consumer.subscribe(TOPICS.sql, selector, async msg => {
    const m = describe(msg, 'd_sql92');
    emit(m);
    inbox.push(m);
  });
  await bounded(consumer.ready(), 'starting the SQL92 consumer');
  // One sharding key: every message goes to the same queue, so the sentinel is pulled last.
  for (let i = 0; i < 6; i++) {
    await send(producer, currentStep, {
      topic: TOPICS.sql, tags: 'TagS', keys: [ `d-${i}` ], body: `d-body-${i}`,
      properties: i === 1 ? {} : { price: String(i) }, shardingKey: 'sql92',
    });
  }
  await send(producer, currentStep, {
    topic: TOPICS.sql, tags: 'TagS', keys: [ 'd-sentinel' ], body: 'd-body-sentinel',
    properties: { price: '100' }, shardingKey: 'sql92',
  });
  await inbox.until(items => items.some(m => keyOf(m) === 'd-sentinel'), 'the SQL92 sentinel');
  await bounded(consumer.close(), 'closing the SQL92 consumer');
  emit({ event: 'step_done', step: currentStep, consumed: inbox.items.length });
}

async function retry(producer) {
  currentStep = 'e_retry';
  const inbox = new Inbox();
  const consumer = newConsumer(GROUPS.retry);
  // Observe (not change) the send-back call, so the report says whether the server took
  // CONSUMER_SEND_MSG_BACK or ali-ons fell back to sending to %RETRY% itself.
  const api = consumer._mqClient;
  const sendBack = api.consumerSendMessageBack;
  api.consumerSendMessageBack = async function(addr, msg, group, delayLevel, timeout, maxTimes) {
    const event = {
      event: 'send_back', step: 'e_retry', broker_addr: addr, msg_id: msg.msgId,
      group, delay_level: delayLevel, max_reconsume_times: maxTimes,
    };
    try {
      await sendBack.apply(this, arguments);
      emit(Object.assign(event, { ok: true }));
    } catch (err) {
      emit(Object.assign(event, { ok: false, error: err.message, code: err.code }));
      throw err;
    }
  };
  let failed = false;
  consumer.subscribe(TOPICS.retry, '*', async msg => {
    const m = describe(msg, 'e_retry');
    emit(m);
    inbox.push(m);
    if (keyOf(m) === 'e-fail-once' && !failed) {
      failed = true;
      throw new Error('conformance: intended failure, the message must come back');
    }
  });
  await bounded(consumer.ready(), 'starting the retry consumer');
  await send(producer, currentStep, {
    topic: TOPICS.retry, tags: 'TagR', keys: [ 'e-fail-once' ], body: 'e-body-fail-once',
  });
  await send(producer, currentStep, {
    topic: TOPICS.retry, tags: 'TagR', keys: [ 'e-ok' ], body: 'e-body-ok',
  });
  await inbox.until(items => items.filter(m => keyOf(m) === 'e-fail-once').length >= 2 &&
    items.some(m => keyOf(m) === 'e-ok'), 'the failed message to come back');
  await bounded(consumer.close(), 'closing the retry consumer');
  emit({ event: 'step_done', step: currentStep, consumed: inbox.items.length });
}

async function restart(producer) {
  currentStep = 'f_restart';
  const inbox = new Inbox();
  const consumer = newConsumer(GROUPS.tags);
  consumer.subscribe(TOPICS.main, 'TagA || TagB', async msg => {
    const m = describe(msg, 'f_restart');
    emit(m);
    inbox.push(m);
  });
  await bounded(consumer.ready(), 'restarting the tag consumer');
  // Sent round robin over the queues: once these arrive, anything committed before them
  // that was delivered again would already have arrived too.
  const fresh = [];
  for (let i = 0; i < 4; i++) {
    fresh.push(keyOf(await send(producer, currentStep, {
      topic: TOPICS.main, tags: i % 2 ? 'TagB' : 'TagA', keys: [ `f-${i}` ], body: `f-body-${i}`,
    })));
  }
  await inbox.until(items => fresh.every(k => items.some(m => keyOf(m) === k)),
    'the messages sent after the restart');
  await bounded(consumer.close(), 'closing the restarted consumer');
  emit({ event: 'step_done', step: currentStep, consumed: inbox.items.length });
}

async function main() {
  if (!NAMESRV || !SUFFIX) {
    process.stderr.write('usage: node conformance.js NAMESRV SUFFIX ' +
      '(or ROCKETQ_NAMESRV and CONFORMANCE_SUFFIX)\n');
    process.exit(2);
  }
  emit({
    event: 'config', ali_ons_version: aliOnsVersion, node_version: process.version,
    namesrv: COMMON.nameSrv, suffix: SUFFIX, topics: TOPICS, groups: GROUPS,
    count: COUNT, delay_level: DELAY_LEVEL, step_timeout_ms: STEP_TIMEOUT_MS,
    signed: Boolean(ACCESS_KEY),
  });
  const producer = new Producer(Object.assign({}, COMMON, { producerGroup: GROUPS.producer }));
  producer.on('error', onClientError('producer'));
  currentStep = 'start';
  await bounded(producer.ready(), 'starting the producer');

  const sent = await produceTagged(producer);
  await delayed(producer);
  await consumeTags(sent);
  await sql92(producer);
  await retry(producer);
  await restart(producer);

  currentStep = 'close';
  await bounded(producer.close(), 'closing the producer');
  emit({ event: 'done' });
  finish(0);
}

main().catch(fail);
