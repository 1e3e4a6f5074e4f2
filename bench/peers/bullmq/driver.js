#!/usr/bin/env node
// BullMQ's side of noti's bench (bench/peers/bullmq.py runs it). Every subcommand works on
// the queue QUEUE of the Redis database in BENCH_BROKER_URL (redis://host:port/db) and
// prints one JSON object on stdout:
//
//   add N              N queue.add() awaited one at a time (after one warm-up add): {rate}
//   addBulk N CHUNK    N jobs in queue.addBulk() calls of CHUNK jobs each: {rate}
//   fill N KIND [URL]  N jobs of KIND queued with addBulk (untimed, for the drains): {ids}
//   worker C KIND      a Worker with concurrency C running KIND jobs until SIGTERM
//   latency S RATE W   W warm-up lag jobs, then RATE lag jobs a second for S seconds: {behind_s}
//
// Job kinds: "noop" (one LPUSH of a record to bench:outbox, as noti's sandbox provider
// writes one), "http" (one signed POST to URL: Standard Webhooks headers signed with
// BENCH_WEBHOOK_SECRET, the job's id as webhook-id), "lag" (RPUSH now - t0 to bench:lag).
// Jobs are kept after completion and failure (BullMQ's default: removeOnComplete unset).
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const { performance } = require('node:perf_hooks');
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const QUEUE = 'bench';
const OUTBOX = 'bench:outbox';
const LAG = 'bench:lag';
const PHONE = process.env.BENCH_PHONE || '+15550000000';

function connection() {
  const url = new URL(process.env.BENCH_BROKER_URL || 'redis://127.0.0.1:6379/6');
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    db: Number(url.pathname.slice(1) || 0),
    maxRetriesPerRequest: null,
  };
}

/** Wall-clock seconds with sub-millisecond resolution (Date.now() has whole ms). */
function now() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

/** Print `result` as one JSON line, then exit (once the pipe has taken all of it). */
function out(result) {
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0));
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

function jobsOf(kind, n, url) {
  const jobs = [];
  for (let i = 0; i < n; i++) {
    if (kind === 'noop') jobs.push({ name: 'noop', data: { phone: PHONE, text: `drain ${i}` } });
    else if (kind === 'http')
      jobs.push({ name: 'post', data: { url, body: JSON.stringify({ n: i, text: 'hello' }) } });
    else throw new Error(`no job kind ${kind}`);
  }
  return jobs;
}

async function withQueue(run) {
  const queue = new Queue(QUEUE, { connection: connection() });
  try {
    await queue.waitUntilReady();
    return await run(queue);
  } finally {
    await queue.close();
  }
}

async function add(n) {
  return withQueue(async queue => {
    await queue.add('noop', { phone: PHONE, text: 'warm-up' });
    const started = performance.now();
    for (let i = 0; i < n; i++) await queue.add('noop', { phone: PHONE, text: `message ${i}` });
    const seconds = (performance.now() - started) / 1000;
    return { rate: n / seconds, waiting: await queue.getWaitingCount() };
  });
}

async function addBulk(n, chunk) {
  return withQueue(async queue => {
    await queue.addBulk([{ name: 'noop', data: { phone: PHONE, text: 'warm-up' } }]);
    await queue.obliterate({ force: true });
    const jobs = [];
    for (let i = 0; i < n; i++) jobs.push({ name: 'noop', data: { phone: PHONE, text: `message ${i}` } });
    const started = performance.now();
    for (let start = 0; start < n; start += chunk) await queue.addBulk(jobs.slice(start, start + chunk));
    const seconds = (performance.now() - started) / 1000;
    return { rate: n / seconds, waiting: await queue.getWaitingCount() };
  });
}

async function fill(n, kind, url) {
  return withQueue(async queue => {
    const jobs = jobsOf(kind, n, url);
    const ids = [];
    for (let start = 0; start < n; start += 1000) {
      for (const job of await queue.addBulk(jobs.slice(start, start + 1000))) ids.push(job.id);
    }
    return { ids, waiting: await queue.getWaitingCount() };
  });
}

function webhookKey() {
  const secret = (process.env.BENCH_WEBHOOK_SECRET || 'whsec_').replace(/^whsec_/, '');
  return Buffer.from(secret, 'base64');
}

/** One POST of `body` as webhook `id` on `agent`'s kept-alive sockets; rejects unless 200. */
function post(agent, key, url, body, id) {
  const ts = Math.floor(Date.now() / 1000);
  const data = Buffer.from(body);
  const signature = crypto.createHmac('sha256', key).update(`${id}.${ts}.`).update(data).digest('base64');
  const headers = {
    'content-type': 'application/json',
    'content-length': data.length,
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': `v1,${signature}`,
  };
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers }, response => {
      response.resume();
      response.on('end', () =>
        response.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${response.statusCode}`)),
      );
    });
    request.on('error', reject);
    request.end(data);
  });
}

function processor(kind, concurrency, redis) {
  if (kind === 'noop')
    return async job =>
      void (await redis.lpush(OUTBOX, JSON.stringify({ id: job.id, to: job.data.phone, text: job.data.text, t: now() })));
  if (kind === 'lag') return async job => void (await redis.rpush(LAG, String(now() - job.data.t0)));
  if (kind === 'http') {
    const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    const key = webhookKey();
    return job => post(agent, key, job.data.url, job.data.body, job.id);
  }
  throw new Error(`no job kind ${kind}`);
}

async function worker(concurrency, kind) {
  const redis = new IORedis(connection());
  const w = new Worker(QUEUE, processor(kind, concurrency, redis), { connection: connection(), concurrency });
  w.on('failed', (job, err) => console.error(`job ${job && job.id} failed: ${err.message}`));
  w.on('error', err => console.error(`worker error: ${err.message}`));
  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await w.close();
    await redis.quit();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await w.waitUntilReady();
  console.error(`worker ready: concurrency ${concurrency}, ${kind}`);
}

async function latency(seconds, rate, warmup) {
  const redis = new IORedis(connection());
  try {
    return await withQueue(async queue => {
      for (let i = 0; i < warmup; i++) await queue.add('lag', { t0: now() });
      for (let waited = 0; (await redis.llen(LAG)) < warmup; waited += 20) {
        if (waited > 60000) throw new Error('the warm-up jobs did not run within 60 s');
        await sleep(20);
      }
      await redis.del(LAG);
      const count = Math.floor(rate * seconds);
      const start = performance.now();
      let behind = 0;
      for (let i = 0; i < count; i++) {
        const wait = start + (i * 1000) / rate - performance.now();
        if (wait > 0) await sleep(wait);
        else behind = Math.max(behind, -wait / 1000);
        await queue.add('lag', { t0: now() });
      }
      return { behind_s: behind, sent: count };
    });
  } finally {
    await redis.quit();
  }
}

async function main() {
  const [command, ...args] = process.argv.slice(2);
  const int = i => Number.parseInt(args[i], 10);
  const once = {
    add: () => add(int(0)),
    addBulk: () => addBulk(int(0), int(1)),
    fill: () => fill(int(0), args[1], args[2]),
    latency: () => latency(Number(args[0]), Number(args[1]), int(2)),
  };
  if (command === 'worker') return worker(int(0), args[1]);
  if (!(command in once)) throw new Error(`usage: driver.js add|addBulk|fill|worker|latency ... (not ${command})`);
  out(await once[command]());
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
