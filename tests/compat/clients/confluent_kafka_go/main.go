// Command confluent-kafka-go-compat drives confluent-kafka-go (Debian's
// golang-github-confluentinc-confluent-kafka-go-dev, a cgo binding of the system's librdkafka) for the compat tests.
// It reads one JSON command on stdin and prints one JSON result on stdout; a failure is a message on stderr and exit
// status 1. `--member '<spec>'` runs one consumer group member instead, speaking the line protocol of
// tests/compat/clients/member.py (member.go). Built in GOPATH mode by
// tests/compat/clients/confluent_kafka_go_client.py; admin calls are in admin.go.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/kafka"
)

// #cgo pkg-config: rdkafka
// #include <librdkafka/rdkafka.h>
import "C"

type command struct {
	Op          string      `json:"op"` // metadata, produce, produce_many, consume, consume_many, list_offsets, ... (run)
	Bootstrap   string      `json:"bootstrap"`
	Topic       string      `json:"topic"`
	Topics      []string    `json:"topics"`        // metadata: the topics to ask about; none: every topic
	AutoCreate  bool        `json:"auto_create"`   // metadata: allow.auto.create.topics
	Records     []record    `json:"records"`       // produce
	Batches     [][]record  `json:"batches"`       // produce_many: one producer per batch, all at once
	Acks        int         `json:"acks"`          // produce
	Compression string      `json:"compression"`   // produce: compression.type
	Idempotent  bool        `json:"idempotent"`    // produce: enable.idempotence
	BatchSize   int         `json:"batch_size"`    // produce: batch.num.messages, 0: librdkafka's default
	Partitions  []int32     `json:"partitions"`    // consume, committed
	Start       string      `json:"start"`         // consume: earliest, latest, offset, timestamp
	At          int64       `json:"at"`            // consume: the offset or timestamp; list_offsets: the timestamp
	Count       int         `json:"count"`         // consume, consume_many, group
	Consumers   int         `json:"consumers"`     // consume_many
	FetchWaitMs int         `json:"fetch_wait_ms"` // consume: fetch.wait.max.ms, 0: librdkafka's default
	Group       string      `json:"group"`         // group, committed
	Calls       []adminCall `json:"calls"`         // admin
	TimeoutMs   int         `json:"timeout_ms"`
	MaxBytes    int         `json:"max_message_bytes"` // the broker's message.max.bytes (records.MAX_MESSAGE_BYTES)
	// librdkafka's security settings (security.protocol, ssl.*, sasl.*) for every client; none: plaintext
	Security map[string]string `json:"security"`
}

// record: key, value and header values are base64 in JSON (nil is null); timestamp in ms (0: the client stamps it);
// partition -1: the partitioner picks.
type record struct {
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []header `json:"headers"`
	Timestamp int64    `json:"timestamp"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
}

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "--member" {
		if err := runMember(os.Args[2]); err != nil {
			fail(err)
		}
		return
	}
	var cmd command
	if err := json.NewDecoder(os.Stdin).Decode(&cmd); err != nil {
		fail(err)
	}
	result, err := run(cmd)
	if err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "confluent-kafka-go-compat:", err)
	os.Exit(1)
}

func run(cmd command) (interface{}, error) {
	switch cmd.Op {
	case "metadata":
		return metadata(cmd)
	case "produce":
		return produce(cmd, cmd.Records)
	case "produce_many":
		return produceMany(cmd)
	case "consume":
		return consume(cmd)
	case "consume_many":
		return consumeMany(cmd)
	case "list_offsets":
		return listOffsets(cmd)
	case "group":
		return groupConsume(cmd)
	case "committed":
		return committed(cmd)
	case "admin":
		return admin(cmd)
	case "connect_failure":
		return connectFailure(cmd)
	}
	return nil, fmt.Errorf("unknown op %q", cmd.Op)
}

func timeout(cmd command) time.Duration {
	if cmd.TimeoutMs <= 0 {
		return 30 * time.Second
	}
	return time.Duration(cmd.TimeoutMs) * time.Millisecond
}

// common: the settings of every client here. COMPAT_LIBRDKAFKA_DEBUG (e.g. "protocol,metadata") turns on
// librdkafka's debug log, on stderr.
func common(cmd command, role string) kafka.ConfigMap {
	config := kafka.ConfigMap{"bootstrap.servers": cmd.Bootstrap, "client.id": "compat-ckgo-" + role,
		"broker.address.family": "v4", "message.max.bytes": cmd.MaxBytes}
	for name, value := range cmd.Security {
		config[name] = value
	}
	withDebug(config)
	return config
}

func withDebug(config kafka.ConfigMap) {
	if debug := os.Getenv("COMPAT_LIBRDKAFKA_DEBUG"); debug != "" {
		config["debug"] = debug
	}
}

// metadata: the brokers, and each topic's partitions with their leaders and error code, through the admin client's
// GetMetadata (one topic per call, as librdkafka asks). The broker creates a missing topic only with auto_create.
func metadata(cmd command) (interface{}, error) {
	config := common(cmd, "a")
	config["allow.auto.create.topics"] = cmd.AutoCreate
	client, err := kafka.NewAdminClient(&config)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	answers := []*kafka.Metadata{}
	ms := int(timeout(cmd) / time.Millisecond)
	if len(cmd.Topics) == 0 {
		found, err := client.GetMetadata(nil, true, ms)
		if err != nil {
			return nil, err
		}
		answers = append(answers, found)
	}
	for i := range cmd.Topics {
		found, err := client.GetMetadata(&cmd.Topics[i], false, ms)
		if err != nil {
			return nil, err
		}
		answers = append(answers, found)
	}
	brokers := map[int32]string{}
	topics := map[string]interface{}{}
	for _, answer := range answers {
		for _, b := range answer.Brokers {
			brokers[b.ID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
		}
		for name, t := range answer.Topics {
			leaders := map[int32]int32{}
			for _, p := range t.Partitions {
				leaders[p.ID] = p.Leader
			}
			topics[name] = map[string]interface{}{"error": int(t.Error.Code()), "leaders": leaders}
		}
	}
	return map[string]interface{}{"brokers": brokers, "topics": topics}, nil
}

// produce: sends the records in order and waits for every delivery report; returns each record's (partition, offset).
func produce(cmd command, records []record) (interface{}, error) {
	config := common(cmd, "p")
	config["acks"] = cmd.Acks
	config["compression.type"] = orDefault(cmd.Compression, "none")
	config["enable.idempotence"] = cmd.Idempotent
	config["linger.ms"] = 5
	config["partitioner"] = "murmur2_random" // the Java client's, as every adapter here uses
	config["message.timeout.ms"] = int(timeout(cmd) / time.Millisecond)
	if cmd.BatchSize > 0 {
		config["batch.num.messages"] = cmd.BatchSize
	}
	if cmd.Idempotent { // through cut connections and failed requests, quickly
		config["retry.backoff.ms"] = 20
		config["reconnect.backoff.ms"] = 20
		config["reconnect.backoff.max.ms"] = 200
	}
	producer, err := kafka.NewProducer(&config)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	if err := awaitLeaders(producer, cmd.Topic, timeout(cmd)); err != nil {
		return nil, err
	}
	reports := make(chan kafka.Event, len(records))
	for i, r := range records {
		if err := producer.Produce(message(cmd.Topic, r, i), reports); err != nil {
			return nil, fmt.Errorf("record %d: %v", i, err)
		}
	}
	placed := make([][2]int64, len(records))
	deadline := time.After(timeout(cmd) + 5*time.Second)
	for done := 0; done < len(records); done++ {
		select {
		case event := <-reports:
			delivered := event.(*kafka.Message)
			if delivered.TopicPartition.Error != nil {
				return nil, fmt.Errorf("delivery: %v", delivered.TopicPartition.Error)
			}
			i := delivered.Opaque.(int)
			placed[i] = [2]int64{int64(delivered.TopicPartition.Partition), int64(delivered.TopicPartition.Offset)}
		case <-deadline:
			return nil, fmt.Errorf("%d of %d records delivered within %v", done, len(records), timeout(cmd))
		}
	}
	return map[string]interface{}{"placed": placed}, nil
}

// awaitLeaders asks for the topic until the answer names its partitions' leaders. Kafka answers the request that
// auto-creates a topic with LEADER_NOT_AVAILABLE, after which librdkafka asks again only on its one-second scan of
// unknown topics; a second request, a moment later, finds the topic.
func awaitLeaders(producer *kafka.Producer, topic string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		found, err := producer.GetMetadata(&topic, false, 5000)
		if err == nil && found.Topics[topic].Error.Code() == kafka.ErrNoError && len(found.Topics[topic].Partitions) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no leaders for %s within %v (last error: %v)", topic, within, err)
		}
		time.Sleep(20 * time.Millisecond) // a retry backoff, as librdkafka's own (retry.backoff.ms)
	}
}

func message(topic string, r record, i int) *kafka.Message {
	m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key: r.Key, Value: r.Value, Opaque: i}
	if r.Partition >= 0 {
		m.TopicPartition.Partition = r.Partition
	}
	if r.Timestamp > 0 {
		m.Timestamp = time.Unix(0, r.Timestamp*int64(time.Millisecond))
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	return m
}

func orDefault(text, fallback string) string {
	if text == "" {
		return fallback
	}
	return text
}

// produceMany: one producer per batch, all producing at the same time.
func produceMany(cmd command) (interface{}, error) {
	errs := make([]error, len(cmd.Batches))
	var wg sync.WaitGroup
	for i, batch := range cmd.Batches {
		wg.Add(1)
		go func(i int, batch []record) {
			defer wg.Done()
			_, errs[i] = produce(cmd, batch)
		}(i, batch)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("producer %d: %v", i, err)
		}
	}
	return map[string]interface{}{}, nil
}

// consumer: a Consumer for assign(); librdkafka wants a group.id although no group is joined.
func consumer(cmd command, group string) (*kafka.Consumer, error) {
	config := common(cmd, "c")
	config["group.id"] = group
	config["enable.auto.commit"] = false
	config["auto.offset.reset"] = "earliest"
	config["fetch.max.bytes"] = 2 * cmd.MaxBytes
	config["receive.message.max.bytes"] = 3 * cmd.MaxBytes
	if cmd.FetchWaitMs > 0 {
		config["fetch.wait.max.ms"] = cmd.FetchWaitMs
	}
	return kafka.NewConsumer(&config)
}

func anonymousGroup() string {
	return fmt.Sprintf("compat-ckgo-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// consume: reads `count` records of the assigned partitions from the start position.
func consume(cmd command) (interface{}, error) {
	c, err := consumer(cmd, anonymousGroup())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The topic's leaders first: assigned a partition whose leader it does not know yet, librdkafka retries the
	// first offset lookup only after 500 ms.
	if _, err := c.GetMetadata(&cmd.Topic, false, 15000); err != nil {
		return nil, err
	}
	start, err := startPositions(c, cmd)
	if err != nil {
		return nil, err
	}
	if err := c.Assign(start); err != nil {
		return nil, err
	}
	records, err := read(c, cmd.Count, timeout(cmd))
	if err != nil {
		return nil, err
	}
	return map[string]interface{}{"records": records}, nil
}

func startPositions(c *kafka.Consumer, cmd command) ([]kafka.TopicPartition, error) {
	positions := []kafka.TopicPartition{}
	for _, p := range cmd.Partitions {
		tp := kafka.TopicPartition{Topic: &cmd.Topic, Partition: p}
		switch cmd.Start {
		case "earliest":
			tp.Offset = kafka.OffsetBeginning
		case "latest":
			tp.Offset = kafka.OffsetEnd
		case "offset":
			tp.Offset = kafka.Offset(cmd.At)
		case "timestamp":
			tp.Offset = kafka.Offset(cmd.At) // OffsetsForTimes takes the timestamp in the offset field
		default:
			return nil, fmt.Errorf("unknown start %q", cmd.Start)
		}
		positions = append(positions, tp)
	}
	if cmd.Start != "timestamp" {
		return positions, nil
	}
	found, err := c.OffsetsForTimes(positions, 15000)
	if err != nil {
		return nil, err
	}
	for i := range found {
		if found[i].Offset < 0 { // no record at or after the timestamp: start at the end
			found[i].Offset = kafka.OffsetEnd
		}
	}
	return found, nil
}

// read: the next `count` records the consumer delivers.
func read(c *kafka.Consumer, count int, within time.Duration) ([]record, error) {
	records := []record{}
	deadline := time.Now().Add(within)
	for len(records) < count {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%d of %d records within %v", len(records), count, within)
		}
		switch event := c.Poll(int(minDuration(left, time.Second) / time.Millisecond)).(type) {
		case *kafka.Message:
			if event.TopicPartition.Error != nil {
				return nil, event.TopicPartition.Error
			}
			records = append(records, received(event))
		case kafka.Error:
			fmt.Fprintln(os.Stderr, "confluent-kafka-go-compat: consumer error (retried by librdkafka):", event)
		}
	}
	return records, nil
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func received(m *kafka.Message) record {
	stamp := int64(-1)
	if !m.Timestamp.IsZero() {
		stamp = m.Timestamp.UnixNano() / int64(time.Millisecond)
	}
	r := record{Key: m.Key, Value: m.Value, Partition: m.TopicPartition.Partition,
		Offset: int64(m.TopicPartition.Offset), Timestamp: stamp, Headers: []header{}}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{Key: h.Key, Value: h.Value})
	}
	return r
}

// consumeMany: `consumers` consumers at once, each reading `count` records of the partitions from the start.
func consumeMany(cmd command) (interface{}, error) {
	results := make([]interface{}, cmd.Consumers)
	errs := make([]error, cmd.Consumers)
	var wg sync.WaitGroup
	for i := 0; i < cmd.Consumers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = consume(cmd)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("consumer %d: %v", i, err)
		}
	}
	return map[string]interface{}{"results": results}, nil
}

// listOffsets: QueryWatermarkOffsets (the earliest and latest offsets), then OffsetsForTimes for the timestamp.
func listOffsets(cmd command) (interface{}, error) {
	c, err := consumer(cmd, anonymousGroup())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	partition := cmd.Partitions[0]
	low, high, err := c.QueryWatermarkOffsets(cmd.Topic, partition, 15000)
	if err != nil {
		return nil, err
	}
	found, err := c.OffsetsForTimes([]kafka.TopicPartition{{Topic: &cmd.Topic, Partition: partition,
		Offset: kafka.Offset(cmd.At)}}, 15000)
	if err != nil {
		return nil, err
	}
	if found[0].Error != nil {
		return nil, found[0].Error
	}
	return map[string]interface{}{"earliest": low, "latest": high, "at": int64(found[0].Offset)}, nil
}

// groupConsume: joins `group` subscribed to the topic, reads `count` records from its committed offsets (the
// earliest without), commits the offset after the last record read of each partition, and leaves.
func groupConsume(cmd command) (interface{}, error) {
	c, err := consumer(cmd, cmd.Group)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Subscribe(cmd.Topic, nil); err != nil {
		return nil, err
	}
	records, err := read(c, cmd.Count, timeout(cmd))
	if err != nil {
		return nil, err
	}
	next := map[int32]int64{}
	for _, r := range records {
		if r.Offset+1 > next[r.Partition] {
			next[r.Partition] = r.Offset + 1
		}
	}
	offsets := []kafka.TopicPartition{}
	for p, o := range next {
		offsets = append(offsets, kafka.TopicPartition{Topic: &cmd.Topic, Partition: p, Offset: kafka.Offset(o)})
	}
	if _, err := c.CommitOffsets(offsets); err != nil {
		return nil, fmt.Errorf("commit: %v", err)
	}
	return map[string]interface{}{"records": records}, nil
}

// committed: the group's committed offset of each partition (-1001, OffsetInvalid, where it has none).
func committed(cmd command) (interface{}, error) {
	c, err := consumer(cmd, cmd.Group)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	asked := []kafka.TopicPartition{}
	for _, p := range cmd.Partitions {
		asked = append(asked, kafka.TopicPartition{Topic: &cmd.Topic, Partition: p})
	}
	found, err := c.Committed(asked, int(timeout(cmd)/time.Millisecond))
	if err != nil {
		return nil, err
	}
	offsets := map[int32]int64{}
	for _, tp := range found {
		if tp.Error != nil {
			return nil, tp.Error
		}
		offsets[tp.Partition] = int64(tp.Offset)
	}
	return map[string]interface{}{"offsets": offsets}, nil
}

// connectFailure: a producer that is expected not to get through (TLS or SASL refused). librdkafka retries by
// itself and tells the application through error events: the first one's code name and text. No error within
// `timeout_ms` fails, saying whether the client got metadata (so it got through after all).
func connectFailure(cmd command) (interface{}, error) {
	config := common(cmd, "p")
	config["reconnect.backoff.ms"] = 50
	config["reconnect.backoff.max.ms"] = 500
	producer, err := kafka.NewProducer(&config)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	deadline := time.After(timeout(cmd))
	for {
		select {
		case event := <-producer.Events():
			if failed, ok := event.(kafka.Error); ok {
				return map[string]interface{}{"error": errorName(failed.Code()), "detail": failed.Error()}, nil
			}
		case <-deadline:
			if _, err := producer.GetMetadata(nil, true, 5000); err == nil {
				return nil, fmt.Errorf("no error within %v: the client got metadata", timeout(cmd))
			}
			return nil, fmt.Errorf("no error event within %v", timeout(cmd))
		}
	}
}

// errorName: librdkafka's name of an error code (_AUTHENTICATION, _SSL, _TRANSPORT...), as confluent-kafka's
// KafkaError.name() gives it.
func errorName(code kafka.ErrorCode) string {
	return C.GoString(C.rd_kafka_err2name(C.rd_kafka_resp_err_t(code)))
}
