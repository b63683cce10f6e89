package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
)

type overviewData struct {
	Tenant  api.Tenant
	Cluster api.Cluster
	KeyID   string
	Configs []clientConfig
}

// clientConfig is a copy-ready configuration for one Kafka client.
type clientConfig struct{ ID, Name, Text string }

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	if s.me.TenantID == "" {
		c.redirect(w, r, "/admin/tenants")
		return
	}
	ctx := r.Context()
	t, err := s.api.Tenant(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	cl, err := s.api.Cluster(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := overviewData{Tenant: t, Cluster: cl}
	// The configs name the newest active key; a viewer who may not list
	// keys gets a placeholder instead.
	if keys, err := s.api.APIKeys(ctx); err == nil {
		var best *api.APIKey
		for i, k := range keys {
			if k.Status == "active" && (best == nil || k.CreatedAt.After(best.CreatedAt)) {
				best = &keys[i]
			}
		}
		if best != nil {
			d.KeyID = best.ID
		}
	} else if c.authLost(w, r, err) {
		return
	}
	d.Configs = clientConfigs(cl.BootstrapServers, d.KeyID, c.cfg.KafkaTLS)
	p := sessionPage(s, "Overview", "overview")
	p.Data = d
	c.render(w, r, http.StatusOK, "overview", p)
}

// clientConfigs writes SASL/PLAIN configs for franz-go, kcat and the Java
// client. The secret is never known here: it is shown once, at creation.
func clientConfigs(bootstrap []string, keyID string, tls bool) []clientConfig {
	servers := strings.Join(bootstrap, ",")
	if servers == "" {
		servers = "<bootstrap servers>"
	}
	if keyID == "" {
		keyID = "<key id>"
	}
	const secret = "<your secret>"
	protocol := "SASL_PLAINTEXT"
	if tls {
		protocol = "SASL_SSL"
	}
	seeds := make([]string, 0, len(bootstrap))
	for _, b := range bootstrap {
		seeds = append(seeds, fmt.Sprintf("%q", b))
	}
	if len(seeds) == 0 {
		seeds = append(seeds, `"<bootstrap server>"`)
	}
	tlsOpt, tlsImport := "", ""
	if tls {
		tlsOpt = "\n\tkgo.DialTLSConfig(new(tls.Config)),"
		tlsImport = "\n\t\"crypto/tls\"\n"
	}
	franz := fmt.Sprintf(`import (%s
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

cl, err := kgo.NewClient(
	kgo.SeedBrokers(%s),
	kgo.SASL(plain.Auth{User: %q, Pass: %q}.AsMechanism()),%s
)`, tlsImport, strings.Join(seeds, ", "), keyID, secret, tlsOpt)
	kcat := fmt.Sprintf(`kcat -b %s \
  -X security.protocol=%s \
  -X sasl.mechanisms=PLAIN \
  -X sasl.username=%s \
  -X sasl.password='%s' \
  -L`, servers, protocol, keyID, secret)
	java := fmt.Sprintf(`bootstrap.servers=%s
security.protocol=%s
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`,
		servers, protocol, keyID, secret)
	return []clientConfig{
		{ID: "franz-go", Name: "Go (franz-go)", Text: franz},
		{ID: "kcat", Name: "kcat (librdkafka)", Text: kcat},
		{ID: "java", Name: "Java client (client.properties)", Text: java},
	}
}
