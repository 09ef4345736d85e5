// The "member" command: one consumer-group member speaking the line protocol of tests/compat/clients/member.py
// (EVENT lines on stdout, commands on stdin), for the matrix's group tests. sarama's ConsumerGroup calls Setup with
// the session's whole assignment and Cleanup when the session ends (eager rebalancing only), which become the
// "assigned" and "revoked" events. sarama 1.22 has no synchronous commit (marked offsets are committed every
// Consumer.Offsets.CommitInterval and when a session ends), so a "commit" command is answered with an error event.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// memberSpec: the settings of member.py's spec that sarama takes.
type memberSpec struct {
	ClientID            string  `json:"client_id"`
	SessionTimeoutMs    int     `json:"session_timeout_ms"`
	HeartbeatIntervalMs int     `json:"heartbeat_interval_ms"`
	RebalanceTimeoutMs  int     `json:"rebalance_timeout_ms"`
	FetchWaitMs         int     `json:"fetch_wait_ms"`
	Strategy            *string `json:"strategy"`
}

var eventLock sync.Mutex // handlers of several partitions emit at the same time

func emit(kind string, fields map[string]interface{}) {
	fields["type"] = kind
	line, _ := json.Marshal(fields)
	eventLock.Lock()
	defer eventLock.Unlock()
	fmt.Fprintf(os.Stdout, "EVENT %s\n", line)
}

// member: joins cmd.Group for cmd.Topic and serves the commands on stdin until "close" or their end.
func member(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	if err := configureMember(config, cmd.Member); err != nil {
		return nil, err
	}
	group, err := sarama.NewConsumerGroup(addrs, cmd.Group, config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil { // Consume returns at each rebalance: join again
			if err := group.Consume(ctx, []string{cmd.Topic}, &memberHandler{}); err != nil {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	commands := make(chan string)
	go readCommands(commands)
	for {
		select {
		case err := <-consumed:
			cancel()
			return nil, err
		case op := <-commands:
			switch op {
			case "ping":
				emit("pong", map[string]interface{}{})
			case "commit":
				emit("error", map[string]interface{}{"message": "sarama 1.22 has no synchronous commit"})
			case "close":
				cancel() // ends the session (Cleanup, then its marked offsets are committed)
				if err := <-consumed; err != nil {
					return nil, err
				}
				if err := group.Close(); err != nil { // LeaveGroup
					return nil, err
				}
				emit("closed", map[string]interface{}{})
				return nil, nil
			default:
				emit("error", map[string]interface{}{"message": fmt.Sprintf("unknown command %q", op)})
			}
		}
	}
}

func configureMember(config *sarama.Config, spec *memberSpec) error {
	if spec == nil {
		return fmt.Errorf("the member command needs its spec")
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	config.ClientID = spec.ClientID
	config.Consumer.Group.Session.Timeout = ms(spec.SessionTimeoutMs)
	config.Consumer.Group.Heartbeat.Interval = ms(spec.HeartbeatIntervalMs)
	config.Consumer.Group.Rebalance.Timeout = ms(spec.RebalanceTimeoutMs)
	config.Consumer.MaxWaitTime = ms(spec.FetchWaitMs)
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	if spec.Strategy != nil {
		switch *spec.Strategy {
		case "range":
			config.Consumer.Group.Rebalance.Strategy = sarama.BalanceStrategyRange
		case "roundrobin":
			config.Consumer.Group.Rebalance.Strategy = sarama.BalanceStrategyRoundRobin
		default:
			return fmt.Errorf("sarama 1.22 has no %q assignor", *spec.Strategy)
		}
	}
	return nil
}

// readCommands: the "op" of each command line on stdin; the end of input is a close.
func readCommands(commands chan<- string) {
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		var command struct {
			Op string `json:"op"`
		}
		if json.Unmarshal(lines.Bytes(), &command) == nil && command.Op != "" {
			commands <- command.Op
		}
	}
	commands <- "close"
}

// memberHandler reports each session's assignment and the records it delivers, and marks them for commit.
type memberHandler struct {
	assignment []int32
}

func (h *memberHandler) Setup(session sarama.ConsumerGroupSession) error {
	for _, partitions := range session.Claims() {
		h.assignment = append(h.assignment, partitions...)
	}
	sort.Slice(h.assignment, func(i, j int) bool { return h.assignment[i] < h.assignment[j] })
	emit("assigned", map[string]interface{}{"partitions": h.assignment, "assignment": h.assignment})
	return nil
}

func (h *memberHandler) Cleanup(sarama.ConsumerGroupSession) error {
	emit("revoked", map[string]interface{}{"partitions": h.assignment, "assignment": []int32{}})
	return nil
}

func (h *memberHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		emit("records", map[string]interface{}{
			"records": [][]interface{}{{message.Partition, message.Offset, string(message.Value)}}})
		session.MarkMessage(message, "")
	}
	return nil
}
