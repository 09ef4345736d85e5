// Command sarama-compat drives the Go client sarama (Debian's golang-github-shopify-sarama-dev) for the compat
// tests. It takes one JSON command as its argument, or on stdin when it has none (a command with many records is
// longer than an argument may be), and prints one JSON result on stdout; a failure is a message on stderr and exit
// status 1. Built in GOPATH mode by tests/compat/clients/sarama_client.py. A command's "security" (security.go)
// connects over TLS and/or SASL.
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
	Op            string      `json:"op"` // metadata, produce, consume, list_offsets, group, member, admin
	Bootstrap     string      `json:"bootstrap"`
	Version       string      `json:"version"` // sarama's Config.Version; empty keeps its default
	Topic         string      `json:"topic"`
	Records       []record    `json:"records"`
	Acks          int16       `json:"acks"`
	Compression   string      `json:"compression"`
	Idempotent    bool        `json:"idempotent"`     // produce: Producer.Idempotent, one request in flight
	BatchMessages int         `json:"batch_messages"` // produce: records per request at most; 0: all in one
	Partition     int32       `json:"partition"`
	Partitions    []int32     `json:"partitions"`    // consume: read these at once (else Partition alone)
	Start         string      `json:"start"`         // oldest, newest, an offset, or timestamp:<ms>
	FetchWaitMs   int         `json:"fetch_wait_ms"` // consume: Consumer.MaxWaitTime; 0 keeps sarama's 250 ms
	Timestamp     int64       `json:"timestamp"`     // list_offsets: the time to look up
	Count         int         `json:"count"`
	Group         string      `json:"group"`
	Calls         []adminCall `json:"calls"` // admin: ClusterAdmin calls made in order over one connection
	TimeoutMs     int         `json:"timeout_ms"`
	Security      *security   `json:"security"` // TLS and SASL (security.go); absent: plaintext
	Member        *memberSpec `json:"member"`   // member (member.go): the group member's settings
}

// record: key and value are base64 in JSON (nil is null); timestamp is ms, -1 when the broker sent none (on
// produce: 0 lets sarama stamp it). Headers and timestamps need a protocol of 0.11 or later (v2 batches).
type record struct {
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []header `json:"headers"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Timestamp int64    `json:"timestamp"`
}

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

func main() {
	var cmd command
	switch len(os.Args) {
	case 1:
		if err := json.NewDecoder(os.Stdin).Decode(&cmd); err != nil {
			fail(err)
		}
	case 2:
		if err := json.Unmarshal([]byte(os.Args[1]), &cmd); err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("usage: sarama-compat ['<json command>'], or the command on stdin"))
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
	case "admin":
		return admin(addrs, config, cmd)
	case "list_offsets":
		return listOffsets(addrs, config, cmd)
	case "member":
		if cmd.Version == "" {
			config.Version = sarama.V0_10_2_0 // as in group()
		}
		return member(addrs, config, cmd)
	case "connect":
		return connect(addrs[0], config)
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
	return config, applySecurity(config, cmd.Security)
}

// connect: one connection to one broker, as sarama's Broker opens it (TLS handshake and SASL authentication
// included), then a Metadata request for every topic over it. Its error is the client's own, where sarama's
// Client would only report that it ran out of brokers.
func connect(addr string, config *sarama.Config) (interface{}, error) {
	broker := sarama.NewBroker(addr)
	if err := broker.Open(config); err != nil {
		return nil, err
	}
	defer broker.Close()
	if _, err := broker.Connected(); err != nil { // waits for Open to finish
		return nil, err
	}
	answer, err := broker.GetMetadata(&sarama.MetadataRequest{})
	if err != nil {
		return nil, err
	}
	return map[string]interface{}{"brokers": len(answer.Brokers), "topics": len(answer.Topics)}, nil
}

func timeout(cmd command) time.Duration {
	if cmd.TimeoutMs <= 0 {
		return 30 * time.Second
	}
	return time.Duration(cmd.TimeoutMs) * time.Millisecond
}

// metadata: the brokers, each topic's partitions and each partition's leader. sarama's client asks for every topic
// when it starts; naming a topic asks for it as well, which lets the broker create it.
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
	brokerIDs := map[string]int32{}
	for _, broker := range client.Brokers() {
		brokers = append(brokers, broker.Addr())
		brokerIDs[broker.Addr()] = broker.ID()
	}
	names, err := client.Topics()
	if err != nil {
		return nil, err
	}
	topics := map[string][]int32{}
	leaders := map[string]map[int32]int32{}
	for _, name := range names {
		if topics[name], err = client.Partitions(name); err != nil {
			return nil, err
		}
		leaders[name] = map[int32]int32{}
		for _, partition := range topics[name] {
			leader, err := client.Leader(name, partition)
			if err != nil {
				return nil, err
			}
			leaders[name][partition] = leader.ID()
		}
	}
	return map[string]interface{}{"brokers": brokers, "broker_ids": brokerIDs, "topics": topics,
		"leaders": leaders}, nil
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
	if cmd.BatchMessages > 0 {
		config.Producer.Flush.MaxMessages = cmd.BatchMessages
	}
	config.Producer.Flush.Frequency = 10 * time.Millisecond
	config.Producer.MaxMessageBytes = maxMessageBytes
	if cmd.Idempotent {
		// What sarama's config validation demands of an idempotent producer (besides Version >= 0.11 and acks=-1):
		// one request in flight per broker, and retries, which are the point here.
		config.Producer.Idempotent = true
		config.Net.MaxOpenRequests = 1
		config.Producer.Retry.Max = 1000
		config.Producer.Retry.Backoff = 20 * time.Millisecond
		// Batches of exactly BatchMessages, not whatever the 10 ms timer finds: sarama re-batches the records of a
		// failed request, and a retry whose batch differs from the one the broker already wrote (other first or
		// last sequence) is OUT_OF_ORDER_SEQUENCE_NUMBER from Kafka too. Under load the timer cut uneven batches.
		if cmd.BatchMessages > 0 {
			config.Producer.Flush.Messages = cmd.BatchMessages
			config.Producer.Flush.Frequency = time.Second
		}
	}
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
		for _, h := range r.Headers {
			message.Headers = append(message.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		if r.Timestamp > 0 {
			message.Timestamp = time.Unix(0, r.Timestamp*int64(time.Millisecond))
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

// maxMessageBytes: what the producer may send in one request, above the tests' 1 MiB record (sarama's default,
// 1000000, refuses it); the broker's message.max.bytes is the tests' 4 MiB.
const maxMessageBytes = 4 << 20

// startOffset: where a partition consumer starts; a timestamp is looked up with Client.GetOffset (ListOffsets v1
// from protocol 0.10.1), as sarama's consumer takes offsets only.
func startOffset(client sarama.Client, topic string, partition int32, start string) (int64, error) {
	switch {
	case start == "" || start == "oldest":
		return sarama.OffsetOldest, nil
	case start == "newest":
		return sarama.OffsetNewest, nil
	case strings.HasPrefix(start, "timestamp:"):
		var ms int64
		if _, err := fmt.Sscan(strings.TrimPrefix(start, "timestamp:"), &ms); err != nil {
			return 0, err
		}
		return client.GetOffset(topic, partition, ms)
	}
	var offset int64
	_, err := fmt.Sscan(start, &offset)
	return offset, err
}

// consume: reads `count` records of the partitions (Partitions, else Partition) by assignment (no group) from the
// start position, all partitions at once.
func consume(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	// A fetch error sarama does not handle itself (TOPIC_AUTHORIZATION_FAILED from a broker with ACLs) goes to the
	// caller on secured connections; elsewhere sarama's default (it logs the error and fetches again) is kept.
	config.Consumer.Return.Errors = cmd.Security != nil
	if cmd.FetchWaitMs > 0 {
		config.Consumer.MaxWaitTime = time.Duration(cmd.FetchWaitMs) * time.Millisecond
	}
	// Nothing here is closed: closing a partition consumer waits for the fetch in flight, which the broker holds
	// for up to MaxWaitTime; without a group there is nothing to tell the broker, and the process ends instead.
	client, err := sarama.NewClient(addrs, config)
	if err != nil {
		return nil, err
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	partitions := cmd.Partitions
	if len(partitions) == 0 {
		partitions = []int32{cmd.Partition}
	}
	messages := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, len(partitions))
	for _, p := range partitions {
		start, err := startOffset(client, cmd.Topic, p, cmd.Start)
		if err != nil {
			return nil, err
		}
		partition, err := consumer.ConsumePartition(cmd.Topic, p, start)
		if err != nil {
			return nil, err
		}
		go forward(partition, messages, errs)
	}
	records := []record{}
	deadline := time.After(timeout(cmd))
	for len(records) < cmd.Count {
		select {
		case message := <-messages:
			records = append(records, received(message))
		case err := <-errs:
			return nil, err
		case <-deadline:
			return nil, fmt.Errorf("%d of %d records within %v", len(records), cmd.Count, timeout(cmd))
		}
	}
	return map[string]interface{}{"records": records}, nil
}

// forward: one partition consumer's messages and errors into the channels all partitions share, until it closes.
func forward(partition sarama.PartitionConsumer, messages chan<- *sarama.ConsumerMessage, errs chan<- error) {
	partitionErrors := partition.Errors()
	for {
		select {
		case message, ok := <-partition.Messages():
			if !ok {
				return
			}
			messages <- message
		case err, ok := <-partitionErrors:
			if !ok {
				partitionErrors = nil // Messages() still has records to give
				continue
			}
			errs <- err
			return
		}
	}
}

// listOffsets: the partition's oldest and newest offsets and the first offset at or after the timestamp, through
// Client.GetOffset (ListOffsets v0 with sarama's default protocol, v1 from 0.10.1); -1 where Kafka found none.
func listOffsets(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	client, err := sarama.NewClient(addrs, config)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	found := map[string]int64{}
	for name, at := range map[string]int64{"earliest": sarama.OffsetOldest, "latest": sarama.OffsetNewest,
		"at": cmd.Timestamp} {
		if found[name], err = client.GetOffset(cmd.Topic, cmd.Partition, at); err != nil {
			return nil, err
		}
	}
	return found, nil
}

func received(message *sarama.ConsumerMessage) record {
	stamp := int64(-1)
	if !message.Timestamp.IsZero() {
		stamp = message.Timestamp.UnixNano() / int64(time.Millisecond)
	}
	headers := []header{}
	for _, h := range message.Headers {
		headers = append(headers, header{Key: string(h.Key), Value: h.Value})
	}
	return record{Key: message.Key, Value: message.Value, Headers: headers, Partition: message.Partition,
		Offset: message.Offset, Timestamp: stamp}
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

// adminCall is one ClusterAdmin method and its arguments; which fields count depends on the method.
type adminCall struct {
	Call         string            `json:"call"`
	Topic        string            `json:"topic"`
	Topics       []string          `json:"topics"`
	Partitions   int32             `json:"partitions"`
	Replication  int16             `json:"replication"`
	Configs      map[string]string `json:"configs"`
	ValidateOnly bool              `json:"validate_only"`
	Offsets      map[int32]int64   `json:"offsets"`       // delete_records: partition -> new low watermark
	ResourceType string            `json:"resource_type"` // describe_config, alter_config: see resourceType
	Name         string            `json:"name"`
	Group        string            `json:"group"`
	ACL          *aclSpec          `json:"acl"` // create_acl: a binding; list_acls, delete_acls: a filter
}

// aclSpec: an ACL binding or filter with Kafka's enum codes (sarama's Acl* constants are the same numbers); a nil
// name, principal or host in a filter matches any.
type aclSpec struct {
	ResourceType int     `json:"resource_type"`
	Name         *string `json:"name"`
	PatternType  int     `json:"pattern_type"`
	Principal    *string `json:"principal"`
	Host         *string `json:"host"`
	Operation    int     `json:"operation"`
	Permission   int     `json:"permission"`
}

// adminResult: what a call returned, or its error with the Kafka error code behind it (-1 when there is none).
type adminResult struct {
	Result    interface{} `json:"result"`
	Error     *string     `json:"error"`
	ErrorCode int16       `json:"error_code"`
}

// admin: the calls in order through one ClusterAdmin; a failed call is reported in its result, the next still run.
func admin(addrs []string, config *sarama.Config, cmd command) (interface{}, error) {
	clusterAdmin, err := sarama.NewClusterAdmin(addrs, config)
	if err != nil {
		return nil, err
	}
	defer clusterAdmin.Close()
	results := []adminResult{}
	for _, call := range cmd.Calls {
		result, err := adminCallOn(clusterAdmin, call)
		if err != nil {
			text := err.Error()
			results = append(results, adminResult{Error: &text, ErrorCode: errorCode(err)})
		} else {
			results = append(results, adminResult{Result: result})
		}
	}
	return map[string]interface{}{"results": results}, nil
}

func adminCallOn(clusterAdmin sarama.ClusterAdmin, call adminCall) (interface{}, error) {
	switch call.Call {
	case "create_topic":
		detail := &sarama.TopicDetail{NumPartitions: call.Partitions, ReplicationFactor: call.Replication,
			ConfigEntries: configEntries(call.Configs)}
		return nil, clusterAdmin.CreateTopic(call.Topic, detail, call.ValidateOnly)
	case "create_partitions":
		return nil, clusterAdmin.CreatePartitions(call.Topic, call.Partitions, nil, call.ValidateOnly)
	case "delete_records":
		return nil, clusterAdmin.DeleteRecords(call.Topic, call.Offsets)
	case "delete_topic":
		return nil, clusterAdmin.DeleteTopic(call.Topic)
	case "describe_topics":
		return describeTopics(clusterAdmin, call.Topics)
	case "list_topics":
		return listTopics(clusterAdmin)
	case "describe_cluster":
		brokers, controller, err := clusterAdmin.DescribeCluster()
		if err != nil {
			return nil, err
		}
		found := map[string]interface{}{"controller": controller}
		addrs := map[int32]string{}
		for _, broker := range brokers {
			addrs[broker.ID()] = broker.Addr()
		}
		found["brokers"] = addrs
		return found, nil
	case "describe_config":
		return describeConfig(clusterAdmin, call)
	case "alter_config":
		kind, err := resourceType(call.ResourceType)
		if err != nil {
			return nil, err
		}
		return nil, clusterAdmin.AlterConfig(kind, call.Name, configEntries(call.Configs), call.ValidateOnly)
	case "list_group_offsets":
		return groupOffsets(clusterAdmin, call)
	case "create_acl", "list_acls", "delete_acls":
		return aclCall(clusterAdmin, call)
	}
	return nil, fmt.Errorf("unknown admin call %q", call.Call)
}

// configEntries: the configs as sarama takes them, each value behind a pointer of its own.
func configEntries(configs map[string]string) map[string]*string {
	entries := map[string]*string{}
	for name, value := range configs {
		value := value
		entries[name] = &value
	}
	return entries
}

// describeTopics: name -> {"error": code, "leaders": partition -> leader}, from a Metadata request that asks the
// broker not to create the topics.
func describeTopics(clusterAdmin sarama.ClusterAdmin, topics []string) (interface{}, error) {
	described, err := clusterAdmin.DescribeTopics(topics)
	if err != nil {
		return nil, err
	}
	found := map[string]interface{}{}
	for _, topic := range described {
		leaders := map[int32]int32{}
		for _, partition := range topic.Partitions {
			leaders[partition.ID] = partition.Leader
		}
		found[topic.Name] = map[string]interface{}{"error": int16(topic.Err), "leaders": leaders}
	}
	return found, nil
}

// listTopics: name -> partition count, replication factor and the configs set on the topic (sarama asks Metadata
// for every topic, then DescribeConfigs for all of them in one request).
func listTopics(clusterAdmin sarama.ClusterAdmin) (interface{}, error) {
	listed, err := clusterAdmin.ListTopics()
	if err != nil {
		return nil, err
	}
	found := map[string]interface{}{}
	for name, detail := range listed {
		configs := map[string]string{}
		for key, value := range detail.ConfigEntries {
			if value != nil {
				configs[key] = *value
			}
		}
		found[name] = map[string]interface{}{"partitions": detail.NumPartitions,
			"replication": detail.ReplicationFactor, "configs": configs}
	}
	return found, nil
}

func describeConfig(clusterAdmin sarama.ClusterAdmin, call adminCall) (interface{}, error) {
	kind, err := resourceType(call.ResourceType)
	if err != nil {
		return nil, err
	}
	entries, err := clusterAdmin.DescribeConfig(sarama.ConfigResource{Type: kind, Name: call.Name})
	if err != nil {
		return nil, err
	}
	found := map[string]interface{}{}
	for _, entry := range entries {
		found[entry.Name] = map[string]interface{}{"value": entry.Value, "read_only": entry.ReadOnly,
			"default": entry.Default, "sensitive": entry.Sensitive}
	}
	return found, nil
}

// resourceType: the config resource type sarama sends. sarama 1.22 numbers its constants after the ACL resource
// types, so its BrokerResource is 5 where Kafka's BROKER config resource is 4 (sarama's ClusterResource); "broker"
// sends 4, "sarama-broker" sarama's own constant.
func resourceType(name string) (sarama.ConfigResourceType, error) {
	switch name {
	case "topic":
		return sarama.TopicResource, nil
	case "broker":
		return sarama.ClusterResource, nil
	case "sarama-broker":
		return sarama.BrokerResource, nil
	}
	return sarama.UnknownResource, fmt.Errorf("unknown resource type %q", name)
}

// groupOffsets: partition -> committed offset (-1: none) of the group for call.Topic's partitions 0..Partitions-1.
func groupOffsets(clusterAdmin sarama.ClusterAdmin, call adminCall) (interface{}, error) {
	partitions := []int32{}
	for partition := int32(0); partition < call.Partitions; partition++ {
		partitions = append(partitions, partition)
	}
	fetched, err := clusterAdmin.ListConsumerGroupOffsets(call.Group, map[string][]int32{call.Topic: partitions})
	if err != nil {
		return nil, err
	}
	found := map[int32]int64{}
	for _, partition := range partitions {
		block := fetched.GetBlock(call.Topic, partition)
		if block == nil {
			return nil, fmt.Errorf("no offset for %s [%d] in the answer", call.Topic, partition)
		}
		if block.Err != sarama.ErrNoError {
			return nil, block.Err
		}
		found[partition] = block.Offset
	}
	return found, nil
}

// errorCode: the Kafka error code an admin error carries, -1 for errors that are not the broker's.
func errorCode(err error) int16 {
	switch e := err.(type) {
	case sarama.KError:
		return int16(e)
	case *sarama.TopicError:
		return int16(e.Err)
	case *sarama.TopicPartitionError:
		return int16(e.Err)
	}
	return -1
}

// aclCall: ClusterAdmin's CreateACL, ListAcls and DeleteACL. sarama 1.22 sends them at version 0 (LITERAL patterns
// only) and CreateACL does not look at the per-binding errors of the answer. Bindings found or deleted come back as
// aclSpecs.
func aclCall(clusterAdmin sarama.ClusterAdmin, call adminCall) (interface{}, error) {
	a := call.ACL
	if a == nil {
		return nil, fmt.Errorf("%s needs an acl", call.Call)
	}
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceType(a.ResourceType), ResourceName: a.Name,
		ResourcePatternTypeFilter: sarama.AclResourcePatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: sarama.AclOperation(a.Operation), PermissionType: sarama.AclPermissionType(a.Permission)}
	switch call.Call {
	case "create_acl":
		resource := sarama.Resource{ResourceType: filter.ResourceType, ResourceName: deref(a.Name),
			ResoucePatternType: filter.ResourcePatternTypeFilter}
		return nil, clusterAdmin.CreateACL(resource, sarama.Acl{Principal: deref(a.Principal), Host: deref(a.Host),
			Operation: filter.Operation, PermissionType: filter.PermissionType})
	case "list_acls":
		found, err := clusterAdmin.ListAcls(filter)
		if err != nil {
			return nil, err
		}
		specs := []aclSpec{}
		for _, resource := range found {
			for _, acl := range resource.Acls {
				specs = append(specs, specOf(resource.Resource, *acl))
			}
		}
		return specs, nil
	}
	deleted, err := clusterAdmin.DeleteACL(filter, false)
	if err != nil {
		return nil, err
	}
	specs := []aclSpec{}
	for _, matching := range deleted {
		if matching.Err != sarama.ErrNoError {
			return nil, matching.Err
		}
		specs = append(specs, specOf(matching.Resource, matching.Acl))
	}
	return specs, nil
}

func specOf(resource sarama.Resource, acl sarama.Acl) aclSpec {
	name, principal, host := resource.ResourceName, acl.Principal, acl.Host
	return aclSpec{ResourceType: int(resource.ResourceType), Name: &name, PatternType: int(resource.ResoucePatternType),
		Principal: &principal, Host: &host, Operation: int(acl.Operation), Permission: int(acl.PermissionType)}
}

func deref(text *string) string {
	if text == nil {
		return ""
	}
	return *text
}
