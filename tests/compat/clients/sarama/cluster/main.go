// Command sarama-cluster drives sarama (Debian's golang-github-shopify-sarama-dev 1.22) against a cluster for
// tests/compat/test_cluster_sarama.py; built by tests/compat/clients/cluster_sarama.py like ../main.go.
//
// Its one argument is a JSON spec. Op "workload" runs an idempotent SyncProducer (acks=all, one request in flight)
// and a consumer group until stdin closes, speaking the line protocol of tests/compat/clients/cluster_workload.py:
// commands {"op": "produce", "from": a, "to": b} and {"op": "close"} in, EVENT lines out. Op "produce" sends
// spec.values to one partition with acks=all and spec.retries retries, and prints {"ok": ...} or the error with
// Kafka's error code. Metadata is refreshed every second, so that moved leaders are found quickly.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type spec struct {
	Op         string   `json:"op"`
	Bootstrap  string   `json:"bootstrap"`
	Topic      string   `json:"topic"`
	Group      string   `json:"group"`
	Partitions int32    `json:"partitions"`
	Chunk      int      `json:"chunk"`
	Partition  int32    `json:"partition"`
	Values     []string `json:"values"`
	Retries    int      `json:"retries"`
	Idempotent bool     `json:"idempotent"`
}

type command struct {
	Op   string `json:"op"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

var outLock sync.Mutex

func emit(kind string, fields map[string]interface{}) {
	fields["type"] = kind
	line, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	outLock.Lock()
	defer outLock.Unlock()
	fmt.Fprintf(os.Stdout, "EVENT %s\n", line)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sarama-cluster '<json spec>'")
		os.Exit(2)
	}
	var s spec
	if err := json.Unmarshal([]byte(os.Args[1]), &s); err != nil {
		fmt.Fprintln(os.Stderr, "sarama-cluster:", err)
		os.Exit(2)
	}
	sarama.Logger = newStderrLogger()
	switch s.Op {
	case "workload":
		if err := workload(s); err != nil {
			emit("error", map[string]interface{}{"message": err.Error()})
			os.Exit(1)
		}
	case "produce":
		result := produceOnce(s)
		if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "sarama-cluster: unknown op %q\n", s.Op)
		os.Exit(2)
	}
}

func newStderrLogger() sarama.StdLogger {
	return stderrLogger{}
}

type stderrLogger struct{}

func (stderrLogger) Print(v ...interface{}) { fmt.Fprint(os.Stderr, timestamp()+fmt.Sprint(v...)+"\n") }
func (stderrLogger) Printf(format string, v ...interface{}) {
	fmt.Fprint(os.Stderr, timestamp()+strings.TrimRight(fmt.Sprintf(format, v...), "\n")+"\n")
}
func (stderrLogger) Println(v ...interface{}) { fmt.Fprint(os.Stderr, timestamp()+fmt.Sprintln(v...)) }

func timestamp() string { return time.Now().UTC().Format("15:04:05.000 ") }

func configFor(s spec, retries int) *sarama.Config {
	config := sarama.NewConfig()
	config.ClientID = "sarama-cluster"
	config.Version = sarama.V2_1_0_0
	config.Net.DialTimeout = 3 * time.Second
	config.Metadata.RefreshFrequency = time.Second
	config.Metadata.Retry.Max = 30
	config.Metadata.Retry.Backoff = 200 * time.Millisecond
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Return.Successes = true
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Producer.Timeout = 10 * time.Second
	config.Producer.Retry.Max = retries
	config.Producer.Retry.Backoff = 100 * time.Millisecond
	if s.Idempotent {
		config.Producer.Idempotent = true
		config.Net.MaxOpenRequests = 1
		// A send is one batch, and a retried batch the same batch (see ../main.go): Kafka checks a retry's first and
		// last sequence against what it stored.
		config.Producer.Flush.Messages = s.Chunk / int(max32(s.Partitions, 1))
		config.Producer.Flush.Frequency = time.Second
	}
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	config.Consumer.Return.Errors = true
	config.Consumer.MaxWaitTime = 200 * time.Millisecond
	config.Consumer.Group.Session.Timeout = 10 * time.Second
	config.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	config.Consumer.Group.Rebalance.Retry.Max = 30
	config.Consumer.Group.Rebalance.Retry.Backoff = 500 * time.Millisecond
	return config
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// errorFields: the message, and Kafka's error code when the error is the broker's (-1 otherwise). sarama 1.22's
// heartbeat loop hands the group's error channel a nil error when a heartbeat is answered with an error code it has
// no case for (NOT_COORDINATOR while the coordinator moves): its session ends and it rejoins.
func errorFields(err error) map[string]interface{} {
	if err == nil {
		return map[string]interface{}{"message": "nil (a heartbeat answered with an error sarama does not name)",
			"code": -1}
	}
	code := int16(-1)
	if failed, ok := err.(sarama.ProducerErrors); ok && len(failed) > 0 {
		err = failed[0].Err
	}
	if kerr, ok := err.(sarama.KError); ok {
		code = int16(kerr)
	}
	return map[string]interface{}{"message": err.Error(), "code": code}
}

func messagesFor(topic string, partition int32, values []string) []*sarama.ProducerMessage {
	messages := make([]*sarama.ProducerMessage, len(values))
	for i, value := range values {
		messages[i] = &sarama.ProducerMessage{Topic: topic, Partition: partition, Value: sarama.StringEncoder(value)}
	}
	return messages
}

func produceOnce(s spec) map[string]interface{} {
	s.Chunk = len(s.Values)
	s.Partitions = 1
	producer, err := sarama.NewSyncProducer(strings.Split(s.Bootstrap, ","), configFor(s, s.Retries))
	if err != nil {
		return map[string]interface{}{"ok": false, "error": errorFields(err)}
	}
	defer producer.Close()
	if err := producer.SendMessages(messagesFor(s.Topic, s.Partition, s.Values)); err != nil {
		return map[string]interface{}{"ok": false, "error": errorFields(err)}
	}
	return map[string]interface{}{"ok": true}
}

func workload(s spec) error {
	s.Idempotent = true
	addrs := strings.Split(s.Bootstrap, ",")
	config := configFor(s, 1000)
	producer, err := sarama.NewSyncProducer(addrs, config)
	if err != nil {
		return err
	}
	group, err := sarama.NewConsumerGroup(addrs, s.Group, config)
	if err != nil {
		return err
	}
	go func() {
		for err := range group.Errors() {
			emit("crash", map[string]interface{}{"error": errorFields(err)})
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	consumed := make(chan struct{})
	go func() { // sarama's consume loop: a session ends at each rebalance (or error) and the next one rejoins
		defer close(consumed)
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{s.Topic}, handler{}); err != nil && ctx.Err() == nil {
				emit("crash", map[string]interface{}{"error": errorFields(err)})
			}
		}
	}()
	emit("started", map[string]interface{}{})
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		var c command
		if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
			return err
		}
		if c.Op == "close" {
			break
		}
		if c.Op != "produce" {
			return fmt.Errorf("unknown command %q", c.Op)
		}
		produceRange(producer, s, c.From, c.To)
	}
	stop()
	<-consumed
	if err := group.Close(); err != nil { // commits what was marked, leaves the group
		return err
	}
	if err := producer.Close(); err != nil {
		return err
	}
	emit("closed", map[string]interface{}{})
	return nil
}

// produceRange sends a..b-1 in chunks, one SendMessages per partition and chunk, each awaited before the next.
func produceRange(producer sarama.SyncProducer, s spec, from, to int) {
	for start := from; start < to; start += s.Chunk {
		for p := int32(0); p < s.Partitions; p++ {
			numbers := []int{}
			values := []string{}
			for n := start; n < start+s.Chunk && n < to; n++ {
				if int32(n)%s.Partitions == p {
					numbers = append(numbers, n)
					values = append(values, fmt.Sprint(n))
				}
			}
			if len(numbers) == 0 {
				continue
			}
			if err := producer.SendMessages(messagesFor(s.Topic, p, values)); err != nil {
				emit("send_failed", map[string]interface{}{"numbers": numbers, "error": errorFields(err)})
			} else {
				emit("acked", map[string]interface{}{"numbers": numbers})
			}
		}
	}
	emit("produced", map[string]interface{}{"to": to})
}

type handler struct{}

func (handler) Setup(session sarama.ConsumerGroupSession) error {
	emit("joined", map[string]interface{}{"member": session.MemberID(), "generation": session.GenerationID(),
		"assignment": session.Claims()})
	return nil
}

func (handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (handler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		emit("records", map[string]interface{}{"records": [][]interface{}{
			{message.Partition, message.Offset, string(message.Value)}}})
		session.MarkMessage(message, "")
	}
	return nil
}
