{{/* The chart's name, and the release's full name (at most 63 characters, a DNS label). */}}
{{- define "latch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "latch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service's name: "-cluster" must fit in 63 characters too. */}}
{{- define "latch.clusterName" -}}
{{- printf "%s-cluster" (include "latch.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "latch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "latch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "latch.labels" -}}
{{ include "latch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels of the server pods, which every Service, budget and policy selects. */}}
{{- define "latch.serverSelector" -}}
{{ include "latch.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "latch.secretName" -}}
{{- default (include "latch.fullname" .) .Values.secret.name -}}
{{- end -}}

{{- define "latch.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "latch.engine" -}}
{{- if not (has .Values.datastore.engine (list "postgres" "cockroachdb")) -}}
{{- fail (printf "datastore.engine %q: the chart runs nodes that share a database, postgres or cockroachdb" .Values.datastore.engine) -}}
{{- end -}}
{{- .Values.datastore.engine -}}
{{- end -}}

{{/* The pod and container security settings every latch container runs with. */}}
{{- define "latch.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "latch.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The datastore URI from the Secret, which Kubernetes substitutes in the args. */}}
{{- define "latch.datastoreEnv" -}}
- name: DATASTORE_CONN_URI
  valueFrom:
    secretKeyRef:
      name: {{ include "latch.secretName" . }}
      key: datastore-conn-uri
{{- end -}}
