package main

// One consumer-group member, speaking the line protocol of tests/compat/clients/member.py: EVENT lines on stdout,
// commands (commit, ping, close) on stdin. The application takes the rebalances (go.application.rebalance.enable)
// so that it can report them; confluent-kafka-go 0.11.6 has only Assign/Unassign (no incremental assignment), so a
// member rebalances eagerly.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/kafka"
)

type memberSpec struct {
	Bootstrap           string  `json:"bootstrap"`
	Topic               string  `json:"topic"`
	Group               string  `json:"group"`
	ClientID            string  `json:"client_id"`
	SessionTimeoutMs    int     `json:"session_timeout_ms"`
	HeartbeatIntervalMs int     `json:"heartbeat_interval_ms"`
	RebalanceTimeoutMs  int     `json:"rebalance_timeout_ms"`
	InstanceID          *string `json:"instance_id"`
	Strategy            *string `json:"strategy"`
	FetchWaitMs         int     `json:"fetch_wait_ms"`
	GroupProtocol       string  `json:"group_protocol"`
}

type memberCommand struct {
	Op      string           `json:"op"`
	Offsets map[string]int64 `json:"offsets"`
}

type member struct {
	spec       memberSpec
	consumer   *kafka.Consumer
	assignment map[int32]bool
	positions  map[int32]int64 // partition -> the offset after the last record delivered
	out        sync.Mutex
}

func runMember(specText string) error {
	var spec memberSpec
	if err := json.Unmarshal([]byte(specText), &spec); err != nil {
		return err
	}
	if spec.GroupProtocol != "" && spec.GroupProtocol != "classic" {
		return fmt.Errorf("group.protocol %q: librdkafka 2.0.2 has only the classic protocol", spec.GroupProtocol)
	}
	m := &member{spec: spec, assignment: map[int32]bool{}, positions: map[int32]int64{}}
	commands := make(chan memberCommand, 16)
	go readCommands(commands)
	err := m.serve(commands)
	if err != nil {
		m.emit("error", map[string]interface{}{"message": err.Error()})
	}
	return err
}

func readCommands(commands chan<- memberCommand) {
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		var cmd memberCommand
		if json.Unmarshal(scanner.Bytes(), &cmd) == nil && cmd.Op != "" {
			commands <- cmd
		}
	}
	commands <- memberCommand{Op: "close"} // end of input means close
}

func (m *member) config() kafka.ConfigMap {
	config := kafka.ConfigMap{"bootstrap.servers": m.spec.Bootstrap, "client.id": m.spec.ClientID,
		"group.id": m.spec.Group, "broker.address.family": "v4", "enable.auto.commit": false,
		"auto.offset.reset": "earliest", "session.timeout.ms": m.spec.SessionTimeoutMs,
		"heartbeat.interval.ms": m.spec.HeartbeatIntervalMs, "max.poll.interval.ms": m.spec.RebalanceTimeoutMs,
		"fetch.wait.max.ms": m.spec.FetchWaitMs, "go.application.rebalance.enable": true}
	if m.spec.Strategy != nil {
		config["partition.assignment.strategy"] = *m.spec.Strategy
	}
	if m.spec.InstanceID != nil {
		config["group.instance.id"] = *m.spec.InstanceID
	}
	withDebug(config) // the member's log file gets librdkafka's debug log
	return config
}

func (m *member) serve(commands <-chan memberCommand) error {
	config := m.config()
	var err error
	if m.consumer, err = kafka.NewConsumer(&config); err != nil {
		return err
	}
	if err := m.consumer.Subscribe(m.spec.Topic, nil); err != nil {
		return err
	}
	for {
		select {
		case cmd := <-commands:
			switch cmd.Op {
			case "ping":
				m.emit("pong", nil)
			case "commit":
				if err := m.commit(cmd.Offsets); err != nil {
					return err
				}
			case "close":
				if err := m.consumer.Close(); err != nil {
					return err
				}
				m.emit("closed", nil)
				return nil
			default:
				return fmt.Errorf("unknown command %q", cmd.Op)
			}
		default:
			if err := m.poll(); err != nil {
				return err
			}
		}
	}
}

// poll: one wait of up to 200 ms, then whatever else is ready (up to 500 events), reporting records in batches and
// every rebalance as it comes.
func (m *member) poll() error {
	batch := [][3]interface{}{}
	wait := 200
	for i := 0; i < 500; i++ {
		event := m.consumer.Poll(wait)
		wait = 0
		if event == nil {
			break
		}
		switch e := event.(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return e.TopicPartition.Error
			}
			p, o := e.TopicPartition.Partition, int64(e.TopicPartition.Offset)
			if o+1 > m.positions[p] {
				m.positions[p] = o + 1
			}
			var value interface{}
			if e.Value != nil {
				value = string(e.Value)
			}
			batch = append(batch, [3]interface{}{p, o, value})
		case kafka.AssignedPartitions:
			m.flush(&batch)
			if err := m.consumer.Assign(e.Partitions); err != nil {
				return err
			}
			m.assignment = map[int32]bool{}
			m.rebalanced("assigned", e.Partitions, true)
		case kafka.RevokedPartitions:
			m.flush(&batch)
			if err := m.consumer.Unassign(); err != nil {
				return err
			}
			m.rebalanced("revoked", e.Partitions, false)
		case kafka.Error:
			fmt.Fprintln(os.Stderr, "member: librdkafka error (it retries):", e)
		}
	}
	m.flush(&batch)
	return nil
}

func (m *member) flush(batch *[][3]interface{}) {
	if len(*batch) > 0 {
		m.emit("records", map[string]interface{}{"records": *batch})
		*batch = [][3]interface{}{}
	}
}

func (m *member) rebalanced(kind string, partitions []kafka.TopicPartition, gained bool) {
	changed := []int32{}
	for _, tp := range partitions {
		if tp.Topic != nil && *tp.Topic == m.spec.Topic {
			changed = append(changed, tp.Partition)
			m.assignment[tp.Partition] = gained
		}
	}
	owned := []int32{}
	for p, mine := range m.assignment {
		if mine {
			owned = append(owned, p)
		}
	}
	sortPartitions(changed)
	sortPartitions(owned)
	m.emit(kind, map[string]interface{}{"partitions": changed, "assignment": owned})
}

// commit: the given offsets, or for each partition assigned now the offset after the last record delivered;
// synchronously (CommitOffsets waits for the broker's answer).
func (m *member) commit(given map[string]int64) error {
	offsets := map[int32]int64{}
	if given != nil {
		for p, o := range given {
			var partition int32
			if _, err := fmt.Sscan(p, &partition); err != nil {
				return err
			}
			offsets[partition] = o
		}
	} else {
		for p, o := range m.positions {
			if m.assignment[p] {
				offsets[p] = o
			}
		}
	}
	tps := []kafka.TopicPartition{}
	for p, o := range offsets {
		tps = append(tps, kafka.TopicPartition{Topic: &m.spec.Topic, Partition: p, Offset: kafka.Offset(o)})
	}
	if len(tps) > 0 {
		done, err := m.consumer.CommitOffsets(tps)
		if err != nil {
			return fmt.Errorf("commit: %v", err)
		}
		for _, tp := range done {
			if tp.Error != nil {
				return fmt.Errorf("commit of partition %d: %v", tp.Partition, tp.Error)
			}
		}
	}
	committed := map[string]int64{}
	for p, o := range offsets {
		committed[fmt.Sprint(p)] = o
	}
	m.emit("committed", map[string]interface{}{"offsets": committed})
	return nil
}

func sortPartitions(partitions []int32) {
	sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })
}

// emit: one EVENT line of the protocol.
func (m *member) emit(kind string, fields map[string]interface{}) {
	event := map[string]interface{}{"type": kind}
	for k, v := range fields {
		event[k] = v
	}
	line, _ := json.Marshal(event)
	m.out.Lock()
	defer m.out.Unlock()
	fmt.Fprintf(os.Stdout, "EVENT %s\n", line)
}
