data "sluice_cluster" "this" {}

# For a Kafka client's bootstrap.servers.
output "bootstrap_servers" {
  value = join(",", data.sluice_cluster.this.bootstrap_servers)
}
