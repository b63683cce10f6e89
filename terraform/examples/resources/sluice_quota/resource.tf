# Quotas are set by the platform's operators: use a provider configured with
# an operator key.
provider "sluice" {
  alias          = "operator"
  endpoint       = "https://api.sluice.example"
  api_key_id     = var.operator_key_id
  api_key_secret = var.operator_key_secret
}

resource "sluice_quota" "acme" {
  provider  = sluice.operator
  tenant_id = "tn_0123456789abcdef"

  max_topics            = 40
  max_partitions        = 120
  produce_bytes_per_sec = 4194304
  # Quotas left out keep the tenant's current values.
}

variable "operator_key_id" {
  type = string
}

variable "operator_key_secret" {
  type      = string
  sensitive = true
}
