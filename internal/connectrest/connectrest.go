// Package connectrest is the few calls of Kafka Connect's REST API that
// the demos and benchmarks make to a connect worker they run: make or
// change a connector, and delete one.
package connectrest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Put makes the connector name with cfg, or changes its configuration
// (PUT /connectors/{name}/config), on the worker at addr (host:port).
func Put(addr, name string, cfg map[string]string) error {
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return call(http.MethodPut, "http://"+addr+"/connectors/"+name+"/config", body)
}

// Delete deletes the connector name.
func Delete(addr, name string) error {
	return call(http.MethodDelete, "http://"+addr+"/connectors/"+name, nil)
}

// call sends a request and turns an answer other than 2xx into an error
// holding the worker's message.
func call(method, url string, body []byte) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b.String())
	}
	return nil
}
