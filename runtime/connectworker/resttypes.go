package connectworker

// The REST API's bodies, shaped as Kafka Connect's REST entities (package
// org.apache.kafka.connect.runtime.rest.entities) shape them; the tests
// check every field name against them.

// ErrorMessage is the body of every error answer.
type ErrorMessage struct {
	ErrorCode int    `json:"error_code"`
	Message   string `json:"message"`
}

// TaskID names a task of a connector.
type TaskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

// ConnectorInfo is a connector's configuration and tasks.
type ConnectorInfo struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []TaskID          `json:"tasks"`
	Type   string            `json:"type"`
}

// CreateConnectorRequest is the body of POST /connectors.
type CreateConnectorRequest struct {
	Name         string            `json:"name"`
	Config       map[string]string `json:"config"`
	InitialState string            `json:"initial_state,omitempty"`
}

// State is the state of a connector or of one of its tasks.
type State struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

// TaskState is a task's State with its id, and what a running task says
// of where it stands (connect.Describer), which Kafka Connect's answer
// does not carry: a change data capture source's slot and last position.
type TaskState struct {
	ID int `json:"id"`
	State
	Facts map[string]string `json:"facts,omitempty"`
}

// ConnectorStateInfo is the body of GET /connectors/{name}/status.
type ConnectorStateInfo struct {
	Name      string      `json:"name"`
	Connector State       `json:"connector"`
	Tasks     []TaskState `json:"tasks"`
	Type      string      `json:"type"`
	// ServedBy names the worker's plugin that serves a connector class of
	// another project (JDBCSinkClass: PostgresSink); absent otherwise.
	ServedBy string `json:"served_by,omitempty"`
}

// TaskInfo is a task and its configuration.
type TaskInfo struct {
	ID     TaskID            `json:"id"`
	Config map[string]string `json:"config"`
}

// PluginInfo is a connector plugin.
type PluginInfo struct {
	Class   string `json:"class"`
	Type    string `json:"type"`
	Version string `json:"version"`
}

// ConfigKeyInfo is the definition of a setting.
type ConfigKeyInfo struct {
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	Required      bool     `json:"required"`
	DefaultValue  *string  `json:"default_value"`
	Importance    string   `json:"importance"`
	Documentation string   `json:"documentation"`
	Group         string   `json:"group"`
	OrderInGroup  int      `json:"order"`
	Width         string   `json:"width"`
	DisplayName   string   `json:"display_name"`
	Dependents    []string `json:"dependents"`
}

// ConfigValueInfo is a setting's value as validation found it.
type ConfigValueInfo struct {
	Name              string   `json:"name"`
	Value             *string  `json:"value"`
	RecommendedValues []string `json:"recommended_values"`
	Errors            []string `json:"errors"`
	Visible           bool     `json:"visible"`
}

// ConfigInfo is one setting's definition and value.
type ConfigInfo struct {
	Definition ConfigKeyInfo   `json:"definition"`
	Value      ConfigValueInfo `json:"value"`
}

// ConfigInfos is the body of a validation.
type ConfigInfos struct {
	Name       string       `json:"name"`
	ErrorCount int          `json:"error_count"`
	Groups     []string     `json:"groups"`
	Configs    []ConfigInfo `json:"configs"`
}

// ServerInfo is the body of GET /.
type ServerInfo struct {
	Version        string `json:"version"`
	Commit         string `json:"commit"`
	KafkaClusterID string `json:"kafka_cluster_id"`
}
