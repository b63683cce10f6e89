{{/* The release's name prefix. */}}
{{- define "sluice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.labels" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "sluice.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}{{ .Values.database.existingSecret }}{{- else -}}{{ include "sluice.fullname" . }}-database{{- end -}}
{{- end -}}

{{- define "sluice.scheme" -}}
{{- if .Values.tls.secretName -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* The control plane's in-cluster URL, which brokers call. */}}
{{- define "sluice.apiURL" -}}
{{ include "sluice.scheme" . }}://{{ include "sluice.fullname" . }}-controlplane.{{ .Release.Namespace }}.svc.cluster.local:{{ .Values.controlPlane.port }}
{{- end -}}

{{/* The env of every tenantd container: its config file and the database. */}}
{{- define "sluice.databaseEnv" -}}
- name: SLUICE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.databaseSecret" . }}
      key: {{ .Values.database.existingSecretKey }}
{{- end -}}

{{- define "sluice.tlsVolume" -}}
{{- if .Values.tls.secretName }}
- name: tls
  secret:
    secretName: {{ .Values.tls.secretName }}
{{- end }}
{{- end -}}

{{- define "sluice.tlsMount" -}}
{{- if .Values.tls.secretName }}
- name: tls
  mountPath: /etc/sluice/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "sluice.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
{{- end -}}

{{- define "sluice.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}
