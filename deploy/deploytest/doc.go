// Package deploytest holds the tests of the deployment files under deploy/:
// the Helm chart (rendered with a real helm, every object decoded strictly
// into its k8s.io/api type and checked against the properties a cell
// needs), the brokers and control planes started from exactly the flags,
// environment and config files the chart renders, and the systemd units.
// It has no non-test code beyond the helpers its tests share; nothing
// imports it.
package deploytest
