package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHTTPPublish publishes batches of 100 messages of 100 bytes
// (random keys, so each batch spreads over the topic's 3 partitions)
// from 8 concurrent clients to one broker of a three-broker cell (two
// thirds of each publish is forwarded to the other leaders) and reports
// messages per second. Every message is committed by a Raft majority.
func BenchmarkHTTPPublish(b *testing.B) {
	for _, perReq := range []int{1, 100} {
		b.Run(fmt.Sprintf("messages=%d", perReq), func(b *testing.B) {
			c := startCell(b, cellOpts{})
			tn := c.tenant("bench")
			c.topic(tn, "load", 3, nil)
			var req publishReq
			for i := range perReq {
				req.Messages = append(req.Messages, msg{Key: []byte(fmt.Sprintf("key-%d", i)), Value: bytes.Repeat([]byte{'x'}, 100)})
			}
			body, _ := json.Marshal(req)
			url := "http://" + c.brokers[0].httpAddr + publishPath("load")
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var msgs atomic.Int64
			b.SetParallelism(4) // 4 × GOMAXPROCS (2) = 8 clients
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
					r.SetBasicAuth(tn.KeyID, tn.Secret)
					r.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(r)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("publish: %d", resp.StatusCode)
						return
					}
					msgs.Add(int64(perReq))
				}
			})
			b.ReportMetric(float64(msgs.Load())/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
