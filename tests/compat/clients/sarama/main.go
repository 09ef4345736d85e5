// Command sarama-compat drives the Go client sarama (Debian's golang-github-shopify-sarama-dev) for the compat
// tests. It takes one JSON command as its argument and prints one JSON result on stdout; a failure is a message on
// stderr and exit status 1. Built in GOPATH mode by tests/compat/clients/sarama_client.py.
//
// Every command keeps sarama's default configuration unless it names a protocol version ("version": "2.1.0"):
// sarama then assumes a Kafka 0.8.2 broker and sends Metadata v0, Produce v0 with magic 0 messages, Fetch v0 and
// ListOffsets v0, without asking ApiVersions first.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type command struct {
	Op          string   `json:"op"` // metadata, produce, consume, group, version
	Bootstrap   string   `json:"bootstrap"`
	Version     string   `json:"version"` // sarama's Config.Version; empty keeps its default
	Topic       string   `json:"topic"`
	Records     []record `json:"records"`
	Acks        int16    `json:"acks"`
	Compression string   `json:"compression"`
	Partition   int32    `json:"partition"`
	Start       string   `json:"start"` // oldest, newest, or an offset
	Count       int      `json:"count"`
	Group       string   `json:"group"`
	TimeoutMs   int      `json:"timeout_ms"`
}

// record: key and value are base64 in JSON (nil is null); timestamp is ms, -1 when the broker sent none.
type record struct {
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
}

func main() {
	if len(os.Args) != 2 {
		fail(fmt.Errorf("usage: sarama-compat '<json command>'"))
	}
	var cmd command
	if err := json.Unmarshal([]byte(os.Args[1]), &cmd); err != nil {
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
	fmt.Fprintln(os.Stderr, "sarama-compat:", err)
	os.Exit(1)
}

func run(cmd command) (interface{}, error) {
	if cmd.Op == "version" {
		return map[string]string{"default_protocol": sarama.NewConfig().Version.String()}, nil
	}
	config, err := configFor(cmd)
	if err != nil {
		return nil, err
	}
	addrs := strings.Split(cmd.Bootstrap, ",")
	switch cmd.Op {
	case "metadata":
		return metadata(addrs, config, cmd)
	case "produce":
		return produce(addrs, config, cmd)
	case "consume":
		return consume(addrs, config, cmd)
	case "group":
		return group(addrs, config, cmd)
	}
	return nil, fmt.Errorf("unknown op %q", cmd.Op)
}

func configFor(cmd command) (*sarama.Config, error) {
	config := sarama.NewConfig()
	config.ClientID = "sarama-compat"
	if cmd.Version != "" {
		version, err := sarama.ParseKafkaVersion(cmd.Version)
		if err != nil {
			return nil, err
		}
		config.Version = version
	}
	return config, nil
}

func timeout(cmd command) time.Duration {
	if cmd.TimeoutMs <= 0 {
		return 30 * time.Second
	}
	return time.Duration(cmd.TimeoutMs) * time.Millisecond
}

// metadata: the brokers and each topic's partitions; naming a topic asks for it (auto-creation).
func metadata(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	client, err := sarama.NewClient(addrs, config)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	if cmd.Topic != "" {
		if err := client.RefreshMetadata(cmd.Topic); err != nil {
			return nil, err
		}
	}
	brokers := []string{}
	for _, broker := range client.Brokers() {
		brokers = append(brokers, broker.Addr())
	}
	names, err := client.Topics()
	if err != nil {
		return nil, err
	}
	topics := map[string][]int32{}
	for _, name := range names {
		if topics[name], err = client.Partitions(name); err != nil {
			return nil, err
		}
	}
	return map[string]interface{}{"brokers": brokers, "topics": topics}, nil
}

var codecs = map[string]sarama.CompressionCodec{
	"": sarama.CompressionNone, "none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

// produce: sends the records in order through a SyncProducer; returns each one's (partition, offset).
func produce(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	codec, ok := codecs[cmd.Compression]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", cmd.Compression)
	}
	config.Producer.Return.Successes = true // a SyncProducer needs it
	config.Producer.RequiredAcks = sarama.RequiredAcks(cmd.Acks)
	config.Producer.Compression = codec
	config.Producer.Timeout = timeout(cmd)
	config.Producer.Flush.MaxMessages = len(cmd.Records) // one request when it fits, so codecs see batches
	config.Producer.Flush.Frequency = 10 * time.Millisecond
	producer, err := sarama.NewSyncProducer(addrs, config)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	messages := make([]*sarama.ProducerMessage, len(cmd.Records))
	for i, r := range cmd.Records {
		message := &sarama.ProducerMessage{Topic: cmd.Topic}
		if r.Key != nil {
			message.Key = sarama.ByteEncoder(r.Key)
		}
		if r.Value != nil {
			message.Value = sarama.ByteEncoder(r.Value)
		}
		messages[i] = message
	}
	if err := producer.SendMessages(messages); err != nil {
		if failed, ok := err.(sarama.ProducerErrors); ok && len(failed) > 0 {
			return nil, fmt.Errorf("%v; the first: %v", err, failed[0].Err) // say why, not just how many
		}
		return nil, err
	}
	placed := make([][2]int64, len(messages))
	for i, message := range messages {
		placed[i] = [2]int64{int64(message.Partition), message.Offset}
	}
	return map[string]interface{}{"placed": placed}, nil
}

func startOffset(start string) (int64, error) {
	switch start {
	case "", "oldest":
		return sarama.OffsetOldest, nil
	case "newest":
		return sarama.OffsetNewest, nil
	}
	var offset int64
	_, err := fmt.Sscan(start, &offset)
	return offset, err
}

// consume: reads `count` records of one partition by assignment (no group) from the start position.
func consume(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	start, err := startOffset(cmd.Start)
	if err != nil {
		return nil, err
	}
	consumer, err := sarama.NewConsumer(addrs, config)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	partition, err := consumer.ConsumePartition(cmd.Topic, cmd.Partition, start)
	if err != nil {
		return nil, err
	}
	defer partition.Close()
	records := []record{}
	deadline := time.After(timeout(cmd))
	for len(records) < cmd.Count {
		select {
		case message := <-partition.Messages():
			records = append(records, received(message))
		case err := <-partition.Errors():
			return nil, err
		case <-deadline:
			return nil, fmt.Errorf("%d of %d records within %v", len(records), cmd.Count, timeout(cmd))
		}
	}
	return map[string]interface{}{"records": records}, nil
}

func received(message *sarama.ConsumerMessage) record {
	stamp := int64(-1)
	if !message.Timestamp.IsZero() {
		stamp = message.Timestamp.UnixNano() / int64(time.Millisecond)
	}
	return record{Key: message.Key, Value: message.Value, Partition: message.Partition, Offset: message.Offset,
		Timestamp: stamp}
}

// group: joins `group` for `topic`, reads `count` records from the oldest uncommitted offset, marks each one and
// leaves; sarama commits the marked offsets on the way out.
func group(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	if cmd.Version == "" {
		config.Version = sarama.V0_10_2_0 // sarama's consumer groups refuse its default (0.8.2)
	}
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	consumerGroup, err := sarama.NewConsumerGroup(addrs, cmd.Group, config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(cmd))
	defer cancel()
	handler := &collector{want: cmd.Count, done: cancel, records: make(chan record, cmd.Count)}
	errs := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := consumerGroup.Consume(ctx, []string{cmd.Topic}, handler); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	err = <-errs
	if closeErr := consumerGroup.Close(); err == nil {
		err = closeErr
	}
	close(handler.records)
	records := []record{}
	for r := range handler.records {
		records = append(records, r)
	}
	if err != nil {
		return nil, err
	}
	if len(records) < cmd.Count {
		return nil, fmt.Errorf("%d of %d records within %v", len(records), cmd.Count, timeout(cmd))
	}
	return map[string]interface{}{"records": records}, nil
}

type collector struct {
	mu      sync.Mutex // claims of several partitions run at the same time
	want    int
	seen    int
	done    context.CancelFunc
	records chan record
}

func (c *collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (c *collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (c *collector) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		c.mu.Lock()
		if c.seen < c.want {
			c.records <- received(message)
			session.MarkMessage(message, "")
			c.seen++
			if c.seen == c.want {
				c.done() // ends the session: sarama then commits and leaves
			}
		}
		c.mu.Unlock()
	}
	return nil
}
