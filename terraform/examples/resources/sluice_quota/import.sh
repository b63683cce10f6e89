# Quotas are imported by the tenant's id.
terraform import sluice_quota.acme <tenant id>
