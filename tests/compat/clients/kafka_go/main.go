// Command kafka-go-compat drives the Go client kafka-go (Debian's golang-github-segmentio-kafka-go-dev, 0.2.1) for
// the compat tests: one JSON command on stdin, one JSON result on stdout; a failure is a message on stderr and exit
// status 1. Built in GOPATH mode by tests/compat/clients/kafka_go_client.py.
//
// kafka-go 0.2.1 never asks ApiVersions: it sends Metadata v1, Produce v2 with magic 1 messages (timestamps, no
// headers), Fetch v2, ListOffsets v1, CreateTopics v0, DeleteTopics v1 and the classic group protocol (JoinGroup v1,
// SyncGroup v0, OffsetCommit v2, OffsetFetch v1).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/gzip"
	"github.com/segmentio/kafka-go/lz4"
	"github.com/segmentio/kafka-go/snappy"
)

type command struct {
	Op          string   `json:"op"` // metadata, produce, consume, list_offsets, group, admin
	Bootstrap   string   `json:"bootstrap"`
	Topic       string   `json:"topic"`
	Topics      []string `json:"topics"` // metadata: the topics to ask for (none: every topic)
	Records     []record `json:"records"`
	Acks        int      `json:"acks"`
	Compression string   `json:"compression"`
	Partitions  []int    `json:"partitions"`
	Start       string   `json:"start"` // consume: earliest, latest, offset:<n> or timestamp:<ms>
	Timestamp   int64    `json:"timestamp"`
	Count       int      `json:"count"`
	Group       string   `json:"group"`
	Readers     int      `json:"readers"`       // group: members in this process, reading at the same time
	FetchWaitMs int      `json:"fetch_wait_ms"` // consume: the Reader's MaxWait; 0 keeps its default
	Calls       []call   `json:"calls"`         // admin: Conn calls made in order
	TimeoutMs   int      `json:"timeout_ms"`
}

// record: key and value are base64 in JSON (nil is null); timestamp in ms (0 on produce: the client stamps it).
type record struct {
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
	Reader    int    `json:"reader"` // group: which of the command's readers got it
}

func main() {
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
	fmt.Fprintln(os.Stderr, "kafka-go-compat:", err)
	os.Exit(1)
}

func run(cmd command) (interface{}, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout(cmd))
	defer cancel()
	brokers := strings.Split(cmd.Bootstrap, ",")
	switch cmd.Op {
	case "metadata":
		return metadata(ctx, brokers[0], cmd)
	case "produce":
		return nil, produce(ctx, brokers, cmd)
	case "consume":
		return consume(ctx, brokers, cmd)
	case "list_offsets":
		return listOffsets(ctx, brokers[0], cmd)
	case "group":
		return group(ctx, brokers, cmd)
	case "admin":
		return admin(ctx, brokers[0], cmd)
	}
	return nil, fmt.Errorf("unknown op %q", cmd.Op)
}

func timeout(cmd command) time.Duration {
	if cmd.TimeoutMs <= 0 {
		return 30 * time.Second
	}
	return time.Duration(cmd.TimeoutMs) * time.Millisecond
}

// metadata: each topic's partitions with their leaders, and the brokers leading them, from Conn.ReadPartitions
// (Metadata v1, which lets the broker create the topics it names). A topic just created has no leader yet in the
// first answer (LEADER_NOT_AVAILABLE), so named topics are asked for again until each has partitions.
func metadata(ctx context.Context, broker string, cmd command) (interface{}, error) {
	conn, err := kafka.DialContext(ctx, "tcp", broker)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for {
		conn.SetDeadline(deadlineOf(ctx))
		partitions, err := conn.ReadPartitions(cmd.Topics...)
		if err != nil {
			return nil, err
		}
		brokers := map[string]int{}
		leaders := map[string]map[int]int{}
		for _, p := range partitions {
			brokers[fmt.Sprintf("%s:%d", p.Leader.Host, p.Leader.Port)] = p.Leader.ID
			if leaders[p.Topic] == nil {
				leaders[p.Topic] = map[int]int{}
			}
			leaders[p.Topic][p.ID] = p.Leader.ID
		}
		if len(leaders) >= len(cmd.Topics) || ctx.Err() != nil {
			return map[string]interface{}{"brokers": brokers, "leaders": leaders}, nil
		}
		select { // a named topic is still without partitions: ask again shortly
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	deadline, _ := ctx.Deadline()
	return deadline
}

// codecs: what kafka-go 0.2.1 ships (no zstd package).
func codecFor(name string) (kafka.CompressionCodec, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "gzip":
		return gzip.NewCompressionCodec(), nil
	case "snappy":
		return snappy.NewCompressionCodec(), nil
	case "lz4":
		return lz4.NewCompressionCodec(), nil
	}
	return nil, fmt.Errorf("kafka-go 0.2.1 has no %q codec", name)
}

// produce: the records through one Writer, in one WriteMessages call (one Produce request per partition when they
// fit), spread over the partitions by the Writer's default balancer (round-robin).
func produce(ctx context.Context, brokers []string, cmd command) error {
	codec, err := codecFor(cmd.Compression)
	if err != nil {
		return err
	}
	messages := make([]kafka.Message, len(cmd.Records))
	for i, r := range cmd.Records {
		messages[i] = kafka.Message{Key: r.Key, Value: r.Value}
		if r.Timestamp != 0 {
			messages[i].Time = time.Unix(0, r.Timestamp*int64(time.Millisecond))
		}
	}
	// The Writer gives up on a topic without partitions, as a topic is in the first Metadata answer that creates
	// it (LEADER_NOT_AVAILABLE): ask until it has them, as an application making sure of its topic would.
	if _, err := metadata(ctx, brokers[0], command{Topics: []string{cmd.Topic}}); err != nil {
		return err
	}
	writer := kafka.NewWriter(kafka.WriterConfig{
		Brokers: brokers, Topic: cmd.Topic, RequiredAcks: cmd.Acks,
		CompressionCodec: codec, BatchSize: len(messages) + 1, BatchTimeout: 10 * time.Millisecond,
		QueueCapacity: len(messages) + 1, MaxAttempts: 3,
	})
	err = writer.WriteMessages(ctx, messages...)
	if closeErr := writer.Close(); err == nil {
		err = closeErr
	}
	return err
}

// maxBytes: a Reader's fetch size, above the 1 MiB records of the tests. Readers here set MinBytes to 1, as
// applications do: kafka-go 0.2.1 defaults it to MaxBytes, so each fetch would wait out MaxWait for that much.
const maxBytes = 10 << 20

// consume: `count` records from the partitions, one partition Reader (no group) each, all reading at once.
func consume(ctx context.Context, brokers []string, cmd command) (interface{}, error) {
	got := make(chan record, cmd.Count)
	errs := make(chan error, len(cmd.Partitions))
	readers := []*kafka.Reader{}
	for _, partition := range cmd.Partitions {
		config := kafka.ReaderConfig{Brokers: brokers, Topic: cmd.Topic, Partition: partition, MinBytes: 1,
			MaxBytes: maxBytes}
		if cmd.FetchWaitMs > 0 {
			config.MaxWait = time.Duration(cmd.FetchWaitMs) * time.Millisecond
		}
		// Not closed: Close waits for the fetch in flight, which the broker holds for up to MaxWait (10 s by
		// default), and a Reader without a group has nothing to tell the broker; the process ends instead.
		reader := kafka.NewReader(config)
		readers = append(readers, reader)
		offset, err := startOffset(ctx, brokers[0], cmd, partition)
		if err != nil {
			return nil, err
		}
		if err := reader.SetOffset(offset); err != nil {
			return nil, err
		}
	}
	for _, reader := range readers {
		go func(reader *kafka.Reader) {
			for {
				message, err := reader.ReadMessage(ctx)
				if err != nil {
					errs <- err
					return
				}
				select {
				case got <- received(message, 0):
				case <-ctx.Done():
					return
				}
			}
		}(reader)
	}
	return collect(ctx, got, errs, cmd.Count)
}

func collect(ctx context.Context, got chan record, errs chan error, count int) (interface{}, error) {
	records := []record{}
	for len(records) < count {
		select {
		case r := <-got:
			records = append(records, r)
		case err := <-errs:
			return nil, fmt.Errorf("after %d of %d records: %v", len(records), count, err)
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d records in time", len(records), count)
		}
	}
	return map[string]interface{}{"records": records}, nil
}

func received(m kafka.Message, reader int) record {
	return record{Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset,
		Timestamp: m.Time.UnixNano() / int64(time.Millisecond), Reader: reader}
}

// startOffset: where a partition Reader starts. kafka-go's Reader takes FirstOffset, LastOffset or an offset; a
// timestamp is looked up with Conn.ReadOffset (ListOffsets v1) on the partition's leader, as an application does.
func startOffset(ctx context.Context, broker string, cmd command, partition int) (int64, error) {
	switch {
	case cmd.Start == "" || cmd.Start == "earliest":
		return kafka.FirstOffset, nil
	case cmd.Start == "latest":
		return kafka.LastOffset, nil
	case strings.HasPrefix(cmd.Start, "offset:"):
		var offset int64
		_, err := fmt.Sscan(strings.TrimPrefix(cmd.Start, "offset:"), &offset)
		return offset, err
	case strings.HasPrefix(cmd.Start, "timestamp:"):
		var ms int64
		if _, err := fmt.Sscan(strings.TrimPrefix(cmd.Start, "timestamp:"), &ms); err != nil {
			return 0, err
		}
		conn, err := kafka.DialLeader(ctx, "tcp", broker, cmd.Topic, partition)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		return conn.ReadOffset(time.Unix(0, ms*int64(time.Millisecond)))
	}
	return 0, fmt.Errorf("unknown start %q", cmd.Start)
}

// listOffsets: the first and last offsets of partition 0 and the first offset at or after the timestamp, through
// Conn's ListOffsets v1 calls.
func listOffsets(ctx context.Context, broker string, cmd command) (interface{}, error) {
	conn, err := kafka.DialLeader(ctx, "tcp", broker, cmd.Topic, cmd.Partitions[0])
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(deadlineOf(ctx))
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return nil, err
	}
	at, err := conn.ReadOffset(time.Unix(0, cmd.Timestamp*int64(time.Millisecond)))
	if err != nil {
		return nil, err
	}
	return map[string]int64{"earliest": first, "latest": last, "at": at}, nil
}

// group: `readers` group Readers of one process join `group` for `topic` and read until `count` records arrived
// between them. Each record is fetched (FetchMessage), then committed (CommitMessages, synchronous with
// CommitInterval 0) only if it is one of the `count`: what this returns is exactly what the group committed. Close
// leaves the group.
func group(ctx context.Context, brokers []string, cmd command) (interface{}, error) {
	readers := cmd.Readers
	if readers <= 0 {
		readers = 1
	}
	got := make(chan record, cmd.Count)
	errs := make(chan error, readers)
	var mu sync.Mutex // keeps the count of records taken
	taken := 0
	inner, stop := context.WithCancel(ctx)
	defer stop()
	started := []*kafka.Reader{}
	for i := 0; i < readers; i++ {
		reader := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: cmd.Topic, GroupID: cmd.Group,
			MinBytes: 1, MaxBytes: maxBytes, HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
			RebalanceTimeout: 10 * time.Second, MaxWait: time.Second}) // Close waits for the fetch in flight
		started = append(started, reader)
		go func(i int, reader *kafka.Reader) {
			for {
				message, err := reader.FetchMessage(inner)
				if err == nil {
					mu.Lock()
					if taken < cmd.Count {
						if err = reader.CommitMessages(inner, message); err == nil {
							taken++
							got <- received(message, i)
						}
					}
					mu.Unlock()
				}
				if err != nil {
					if inner.Err() == nil {
						errs <- err
					}
					return
				}
			}
		}(i, reader)
	}
	result, err := collect(ctx, got, errs, cmd.Count)
	stop()
	for _, reader := range started {
		reader.Close() // LeaveGroup
	}
	return result, err
}

// call is one Conn admin call: create_topics (topics with partitions, replication, configs) or delete_topics.
type call struct {
	Call   string        `json:"call"`
	Topics []topicConfig `json:"topics"`
}

type topicConfig struct {
	Name        string            `json:"name"`
	Partitions  int               `json:"partitions"`
	Replication int               `json:"replication"`
	Configs     map[string]string `json:"configs"`
}

// admin: the calls in order on one connection to the bootstrap broker (kafka-go 0.2.1 does not look for the
// controller); each result is {"error": message or null}.
func admin(ctx context.Context, broker string, cmd command) (interface{}, error) {
	conn, err := kafka.DialContext(ctx, "tcp", broker)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(deadlineOf(ctx))
	results := []map[string]interface{}{}
	for _, c := range cmd.Calls {
		var err error
		switch c.Call {
		case "create_topics":
			configs := []kafka.TopicConfig{}
			for _, t := range c.Topics {
				entries := []kafka.ConfigEntry{}
				for name, value := range t.Configs {
					entries = append(entries, kafka.ConfigEntry{ConfigName: name, ConfigValue: value})
				}
				configs = append(configs, kafka.TopicConfig{Topic: t.Name, NumPartitions: t.Partitions,
					ReplicationFactor: t.Replication, ConfigEntries: entries})
			}
			err = conn.CreateTopics(configs...)
		case "delete_topics":
			names := []string{}
			for _, t := range c.Topics {
				names = append(names, t.Name)
			}
			err = conn.DeleteTopics(names...)
		default:
			err = fmt.Errorf("unknown admin call %q", c.Call)
		}
		if err != nil {
			results = append(results, map[string]interface{}{"error": err.Error()})
		} else {
			results = append(results, map[string]interface{}{"error": nil})
		}
	}
	return map[string]interface{}{"results": results}, nil
}
