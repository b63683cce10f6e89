terraform {
  required_providers {
    sluice = {
      source = "sluicehq/sluice"
    }
  }
}

# Every setting may come from the environment instead:
# SLUICE_ENDPOINT, SLUICE_API_KEY_ID and SLUICE_API_KEY_SECRET.
provider "sluice" {
  endpoint       = "https://api.sluice.example"
  api_key_id     = var.sluice_api_key_id
  api_key_secret = var.sluice_api_key_secret
}

variable "sluice_api_key_id" {
  type = string
}

variable "sluice_api_key_secret" {
  type      = string
  sensitive = true
}
