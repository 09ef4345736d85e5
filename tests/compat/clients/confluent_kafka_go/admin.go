package main

// The AdminClient of confluent-kafka-go 0.11.6: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs and
// AlterConfigs (the whole of its admin API; it has no group or ACL calls).

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/kafka"
)

// adminCall is one AdminClient method and its arguments; which fields count depends on the method.
type adminCall struct {
	// create_topics, delete_topics, create_partitions, describe_configs or alter_configs
	Call         string            `json:"call"`
	Topics       []newTopic        `json:"topics"`
	Names        []string          `json:"names"`         // delete_topics
	Topic        string            `json:"topic"`         // create_partitions
	IncreaseTo   int               `json:"increase_to"`   // create_partitions
	ResourceType string            `json:"resource_type"` // describe_configs, alter_configs: topic or broker
	Name         string            `json:"name"`
	Configs      map[string]string `json:"configs"` // alter_configs: the whole new set (AlterConfigs replaces)
	ValidateOnly bool              `json:"validate_only"`
}

type newTopic struct {
	Name        string            `json:"name"`
	Partitions  int               `json:"partitions"`
	Replication int               `json:"replication"`
	Configs     map[string]string `json:"configs"`
}

// outcome: Kafka's error code (0: none) and librdkafka's text for it, per topic or config resource.
type outcome struct {
	Code  int    `json:"code"`
	Error string `json:"error"`
}

// admin: the calls in order through one AdminClient; a call that fails as a whole reports "error".
func admin(cmd command) (interface{}, error) {
	config := common(cmd, "a")
	client, err := kafka.NewAdminClient(&config)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	results := []map[string]interface{}{}
	for _, call := range cmd.Calls {
		ctx, cancel := context.WithTimeout(context.Background(), timeout(cmd))
		result, err := adminCallOn(ctx, client, call)
		cancel()
		if err != nil {
			results = append(results, map[string]interface{}{"error": err.Error()})
		} else {
			results = append(results, map[string]interface{}{"result": result})
		}
	}
	return map[string]interface{}{"results": results}, nil
}

func adminCallOn(ctx context.Context, client *kafka.AdminClient, call adminCall) (interface{}, error) {
	validate := kafka.SetAdminValidateOnly(call.ValidateOnly)
	operation := kafka.SetAdminOperationTimeout(15 * time.Second)
	switch call.Call {
	case "create_topics":
		specs := []kafka.TopicSpecification{}
		for _, t := range call.Topics {
			specs = append(specs, kafka.TopicSpecification{Topic: t.Name, NumPartitions: t.Partitions,
				ReplicationFactor: t.Replication, Config: t.Configs})
		}
		return topicOutcomes(client.CreateTopics(ctx, specs, validate, operation))
	case "delete_topics":
		return topicOutcomes(client.DeleteTopics(ctx, call.Names, operation))
	case "create_partitions":
		return topicOutcomes(client.CreatePartitions(ctx, []kafka.PartitionsSpecification{
			{Topic: call.Topic, IncreaseTo: call.IncreaseTo}}, validate, operation))
	case "describe_configs":
		kind, err := kafka.ResourceTypeFromString(call.ResourceType)
		if err != nil {
			return nil, err
		}
		found, err := client.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kind, Name: call.Name}})
		if err != nil {
			return nil, err
		}
		return describedConfigs(found[0]), nil
	case "alter_configs":
		kind, err := kafka.ResourceTypeFromString(call.ResourceType)
		if err != nil {
			return nil, err
		}
		entries := kafka.StringMapToConfigEntries(call.Configs, kafka.AlterOperationSet)
		done, err := client.AlterConfigs(ctx, []kafka.ConfigResource{{Type: kind, Name: call.Name, Config: entries}},
			validate)
		if err != nil {
			return nil, err
		}
		return outcome{Code: int(done[0].Error.Code()), Error: errorText(done[0].Error)}, nil
	}
	return nil, fmt.Errorf("unknown admin call %q", call.Call)
}

func topicOutcomes(results []kafka.TopicResult, err error) (interface{}, error) {
	if err != nil {
		return nil, err
	}
	found := map[string]outcome{}
	for _, r := range results {
		found[r.Topic] = outcome{Code: int(r.Error.Code()), Error: errorText(r.Error)}
	}
	return found, nil
}

func errorText(err kafka.Error) string {
	if err.Code() == kafka.ErrNoError {
		return ""
	}
	return err.Error()
}

// describedConfigs: {"code", "error", "configs": name -> value, source, read_only, sensitive}.
func describedConfigs(result kafka.ConfigResourceResult) interface{} {
	configs := map[string]interface{}{}
	for name, entry := range result.Config {
		configs[name] = map[string]interface{}{"value": entry.Value, "source": entry.Source.String(),
			"read_only": entry.IsReadOnly, "sensitive": entry.IsSensitive}
	}
	return map[string]interface{}{"code": int(result.Error.Code()), "error": errorText(result.Error),
		"configs": configs}
}
