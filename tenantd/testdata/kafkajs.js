// Drives a Sluice cell with kafkajs, as a Node.js application would, and
// checks what it sees; exits non-zero with the reason on the first
// mismatch. Run by tenantd/kafkajs_test.go:
//   NODE_PATH=.cache/kafkajs/node_modules BROKERS=host:port KEY_ID=… SECRET=… \
//   MECH=plain|scram-sha-256|scram-sha-512 TOPIC=… CELL=… node kafkajs.js
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(k + ' is not set'); return v }
const [brokers, keyID, secret, mech, topic, cell] = ['BROKERS', 'KEY_ID', 'SECRET', 'MECH', 'TOPIC', 'CELL'].map(env)
const client = (password) => new Kafka({
  clientId: 'kafkajs-test', brokers: brokers.split(','), logLevel: logLevel.NOTHING,
  sasl: { mechanism: mech, username: keyID, password }, retry: { retries: 8 },
})
const check = (ok, what) => { if (!ok) throw new Error(what) }
const n = 100, keys = 4, group = topic + '-group'

async function main () {
  const kafka = client(secret)
  const admin = kafka.admin()
  await admin.connect()

  const cluster = await admin.describeCluster()
  check(cluster.clusterId === cell && cluster.brokers.length === 3, 'describeCluster: ' + JSON.stringify(cluster))

  const created = await admin.createTopics({ waitForLeaders: true, topics: [{
    topic, numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] })
  check(created === true, 'createTopics answered ' + created)
  check((await admin.listTopics()).includes(topic), 'listTopics lacks ' + topic)
  const md = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]
  check(md.partitions.length === 3 && md.partitions.every(p => p.replicas.includes(p.leader)),
    'metadata: ' + JSON.stringify(md.partitions))
  const cfg = (await admin.describeConfigs({ includeSynonyms: false,
    resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }] })).resources[0].configEntries
  check(cfg.length === 1 && cfg[0].configValue === '3600000', 'describeConfigs: ' + JSON.stringify(cfg))

  // An idempotent producer, ten sends of ten keyed records.
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let i = 0; i < n / 10; i++) {
    await producer.send({ topic, messages: Array.from({ length: 10 }, (_, j) => {
      const v = i * 10 + j
      return { key: 'k' + (v % keys), value: String(v) }
    }) })
  }
  await producer.disconnect()
  const ends = await admin.fetchTopicOffsets(topic)
  const stored = ends.reduce((s, o) => s + Number(o.high) - Number(o.low), 0)
  check(stored === n, `fetchTopicOffsets: ${stored} records stored, want ${n}: ` + JSON.stringify(ends))

  // A consumer group reads every record, each key's in the order sent.
  const consumer = kafka.consumer({ groupId: group })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const last = {}
  let read = 0
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the group read ${read} of ${n} records in 60 s`)), 60000)
    consumer.run({ eachMessage: async ({ message }) => {
      const k = message.key.toString(), v = Number(message.value.toString())
      if (k in last && last[k] >= v) { clearTimeout(timer); reject(new Error(`key ${k}: ${v} after ${last[k]}`)) }
      last[k] = v
      if (++read === n) { clearTimeout(timer); resolve() }
    } })
  })
  await consumer.disconnect() // commits what was read
  const committed = (await admin.fetchOffsets({ groupId: group, topics: [topic] }))[0].partitions
    .reduce((s, p) => s + Number(p.offset), 0)
  check(committed === n, `fetchOffsets: ${committed} committed, want ${n}`)
  const g = (await admin.describeGroups([group])).groups[0]
  check(g.state === 'Empty' && g.protocolType === 'consumer', 'describeGroups: ' + JSON.stringify(g))
  check((await admin.listGroups()).groups.some(x => x.groupId === group), 'listGroups lacks ' + group)

  // The offset tools (with OFFSET_TOOLS=1): setOffsets, then resetOffsets
  // to the earliest, which kafkajs commits as -2 (kept as sent, as Kafka
  // keeps it); the group's next consumer then reads every record again.
  let reread = 0
  if (process.env.OFFSET_TOOLS === '1') {
    const groupOffsets = async () => (await admin.fetchOffsets({ groupId: group, topics: [topic] }))[0].partitions
    await admin.setOffsets({ groupId: group, topic, partitions: [0, 1, 2].map(partition => ({ partition, offset: '1' })) })
    let fetched = await groupOffsets()
    check(fetched.length === 3 && fetched.every(p => p.offset === '1'), 'fetchOffsets after setOffsets: ' + JSON.stringify(fetched))
    await admin.resetOffsets({ groupId: group, topic, earliest: true })
    fetched = await groupOffsets()
    check(fetched.length === 3 && fetched.every(p => p.offset === '-2'), 'fetchOffsets after resetOffsets: ' + JSON.stringify(fetched))
    const again = kafka.consumer({ groupId: group })
    await again.connect()
    await again.subscribe({ topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`after resetOffsets the group read ${reread} of ${n} records in 60 s`)), 60000)
      again.run({ eachMessage: async () => { if (++reread === n) { clearTimeout(timer); resolve() } } })
    })
    await again.disconnect()
  }

  // deleteTopics answers once the control plane deleted the topic; each
  // broker's metadata drops it when it learns the new cell state, within
  // a second or two (as a Kafka broker's metadata cache follows the
  // controller): listTopics is asked again until then, for up to 10 s.
  await admin.deleteTopics({ topics: [topic] })
  let listed = true
  for (let i = 0; i < 50 && listed; i++) {
    listed = (await admin.listTopics()).includes(topic)
    if (listed) await new Promise(resolve => setTimeout(resolve, 200))
  }
  check(!listed, 'listTopics still has ' + topic + ' 10 s after deleteTopics')
  await admin.disconnect()

  // A wrong secret is refused, with the broker's reason.
  const wrong = client(secret + 'x').admin()
  try {
    await wrong.connect()
    throw new Error('a wrong secret connected')
  } catch (e) {
    check(e.name === 'KafkaJSSASLAuthenticationError', 'wrong secret: ' + e.name + ': ' + e.message)
  }
  console.log(`OK ${mech}: produced ${n}, read ${read}, committed ${committed}` + (reread ? `, read ${reread} again after resetOffsets` : ''))
}

main().catch(e => { console.error(`FAILED ${mech}: ${e.name}: ${e.message}`); process.exit(1) })
