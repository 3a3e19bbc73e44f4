{{/* Names, labels, per-service values and server addresses shared by every template. */}}

{{- define "evoskill.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "evoskill.fullname" -}}
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

{{- define "evoskill.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every resource of the release. */}}
{{- define "evoskill.labels" -}}
helm.sh/chart: {{ include "evoskill.chart" . }}
app.kubernetes.io/name: {{ include "evoskill.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: evoskill
{{- end -}}

{{/* Selector labels of every evoskill service pod of the release: (dict "root" $ ). */}}
{{- define "evoskill.releaseSelectorLabels" -}}
app.kubernetes.io/name: {{ include "evoskill.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "name" "sandbox"). */}}
{{- define "evoskill.selectorLabels" -}}
{{ include "evoskill.releaseSelectorLabels" . }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* All labels of one component: (dict "root" $ "name" "sandbox"). */}}
{{- define "evoskill.componentLabels" -}}
{{ include "evoskill.labels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* Resource name of one component: (dict "root" $ "name" "sandbox"). */}}
{{- define "evoskill.componentName" -}}
{{- printf "%s-%s" (include "evoskill.fullname" .root) .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Deep merge of two maps as YAML: (list $base $override). Unlike sprig's merge/mergeOverwrite,
false, 0 and "" in the override win, so a service can switch off what serviceDefaults switches on.
*/}}
{{- define "evoskill.merge" -}}
{{- $out := deepCopy (index . 0) -}}
{{- range $key, $value := (index . 1) -}}
{{- $current := index $out $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $current) -}}
{{- $_ := set $out $key (fromYaml (include "evoskill.merge" (list $current $value))) -}}
{{- else -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The effective values of one service, serviceDefaults overlaid with services.<name>, checked:
(dict "root" $ "name" "learner"). Use with fromYaml.
*/}}
{{- define "evoskill.serviceValues" -}}
{{- $root := .root -}}
{{- $own := index $root.Values.services .name | default dict -}}
{{- $cfg := fromYaml (include "evoskill.merge" (list $root.Values.serviceDefaults $own)) -}}
{{- if not $cfg.port -}}
{{- fail (printf "services.%s.port must be set" .name) -}}
{{- end -}}
{{- if $cfg.stateful -}}
{{- if or $cfg.autoscaling.enabled $cfg.keda.enabled (gt (int $cfg.replicas) 1) -}}
{{- fail (printf "services.%s is stateful (single replica on its own volume): keep replicas 1 and autoscaling.enabled and keda.enabled false" .name) -}}
{{- end -}}
{{- end -}}
{{- if and $cfg.keda.enabled (not $cfg.keda.consumers) -}}
{{- fail (printf "services.%s.keda.enabled needs keda.consumers (durable JetStream consumer names)" .name) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Names of the enabled services, sorted: use with fromYamlArray. */}}
{{- define "evoskill.enabledServices" -}}
{{- $names := list -}}
{{- range $name, $svc := .Values.services -}}
{{- $cfg := fromYaml (include "evoskill.merge" (list $.Values.serviceDefaults ($svc | default dict))) -}}
{{- if $cfg.enabled -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- toYaml (sortAlpha $names) -}}
{{- end -}}

{{- define "evoskill.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Server addresses: explicit externalServers values, else the official charts' Service names. */}}
{{- define "evoskill.natsUrl" -}}
{{- default (printf "nats://%s-nats:4222" .Release.Name) .Values.externalServers.nats.url -}}
{{- end -}}

{{- define "evoskill.natsMonitoringEndpoint" -}}
{{- default (printf "%s-nats-headless.%s.svc.cluster.local:8222" .Release.Name .Release.Namespace) .Values.externalServers.nats.monitoringEndpoint -}}
{{- end -}}

{{- define "evoskill.temporalAddress" -}}
{{- default (printf "%s-temporal-frontend:7233" .Release.Name) .Values.externalServers.temporal.address -}}
{{- end -}}

{{- define "evoskill.qdrantUrl" -}}
{{- default (printf "http://%s-qdrant:6333" .Release.Name) .Values.externalServers.qdrant.url -}}
{{- end -}}

{{- define "evoskill.collectorName" -}}
{{- include "evoskill.componentName" (dict "root" . "name" "otel-collector") -}}
{{- end -}}

{{- define "evoskill.otlpEndpoint" -}}
{{- if .Values.telemetry.otlpEndpoint -}}
{{- .Values.telemetry.otlpEndpoint -}}
{{- else if .Values.otelCollector.enabled -}}
{{- printf "http://%s:4317" (include "evoskill.collectorName" .) -}}
{{- end -}}
{{- end -}}

{{/*
The ConfigMap of one service: (dict "root" $ "name" "sandbox"). Its checksum rolls that service's
pods when its settings change.
*/}}
{{- define "evoskill.configMap" -}}
{{- $ := .root -}}
{{- $name := .name -}}
{{- $cfg := fromYaml (include "evoskill.serviceValues" (dict "root" $ "name" $name)) -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "evoskill.componentName" (dict "root" $ "name" $name) }}
  labels:
    {{- include "evoskill.componentLabels" (dict "root" $ "name" $name) | nindent 4 }}
data:
  EVOSKILL_STATE_DIR: {{ $.Values.stateDir | quote }}
  EVOSKILL_BIND_HOST: {{ $cfg.bindHost | quote }}
  EVOSKILL_NATS__URL: {{ include "evoskill.natsUrl" $ | quote }}
  EVOSKILL_NATS__STREAM: {{ $.Values.externalServers.nats.stream | quote }}
  {{- if $.Values.externalServers.nats.tls.secretName }}
  EVOSKILL_NATS__TLS__CA: /etc/evoskill/nats-tls/ca.crt
  {{- if $.Values.externalServers.nats.tls.clientCert }}
  EVOSKILL_NATS__TLS__CERT: /etc/evoskill/nats-tls/tls.crt
  EVOSKILL_NATS__TLS__KEY: /etc/evoskill/nats-tls/tls.key
  {{- end }}
  {{- end }}
  EVOSKILL_TEMPORAL__ADDRESS: {{ include "evoskill.temporalAddress" $ | quote }}
  EVOSKILL_TEMPORAL__NAMESPACE: {{ $.Values.externalServers.temporal.namespace | quote }}
  EVOSKILL_TEMPORAL__TASK_QUEUE: {{ $.Values.externalServers.temporal.taskQueue | quote }}
  EVOSKILL_QDRANT__URL: {{ include "evoskill.qdrantUrl" $ | quote }}
  EVOSKILL_QDRANT__COLLECTION: {{ $.Values.externalServers.qdrant.collection | quote }}
  EVOSKILL_TELEMETRY__OTLP_ENDPOINT: {{ include "evoskill.otlpEndpoint" $ | quote }}
  EVOSKILL_TELEMETRY__ENABLED: {{ $.Values.telemetry.enabled | quote }}
  {{- range $other, $otherValues := $.Values.services }}
  {{- $port := (fromYaml (include "evoskill.merge" (list $.Values.serviceDefaults ($otherValues | default dict)))).port }}
  {{ printf "EVOSKILL_%s_ENDPOINT__HOST" (upper $other) }}: {{ include "evoskill.componentName" (dict "root" $ "name" $other) | quote }}
  {{ printf "EVOSKILL_%s_ENDPOINT__PORT" (upper $other) }}: {{ $port | int | quote }}
  {{- end }}
  {{- range $key, $value := $cfg.env }}
  {{ $key }}: {{ $value | toString | quote }}
  {{- end }}
{{- end -}}
