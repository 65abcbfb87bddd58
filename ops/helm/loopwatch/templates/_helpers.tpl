{{- define "loopwatch.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "loopwatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "loopwatch.labels" -}}
app.kubernetes.io/name: {{ include "loopwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "loopwatch.selector" -}}
app.kubernetes.io/name: {{ include "loopwatch.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "loopwatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "loopwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "loopwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "loopwatch.saslSecret" -}}
{{- default (printf "%s-kafka" (include "loopwatch.fullname" .)) .Values.kafka.sasl.existingSecret -}}
{{- end -}}

{{- define "loopwatch.sasl" -}}
{{- hasPrefix "SASL" .Values.kafka.securityProtocol -}}
{{- end -}}

{{- define "loopwatch.tls" -}}
{{- or (eq .Values.kafka.securityProtocol "SSL") (eq .Values.kafka.securityProtocol "SASL_SSL") -}}
{{- end -}}

{{/* The environment every component shares: Kafka, its credentials, the settings. */}}
{{- define "loopwatch.env" -}}
- name: KAFKA_BOOTSTRAP_SERVERS
  value: {{ .Values.kafka.bootstrapServers | quote }}
- name: KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
{{- if eq (include "loopwatch.sasl" .) "true" }}
- name: KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: KAFKA_SASL_USERNAME
  value: {{ required "kafka.sasl.username is required with a SASL security protocol" .Values.kafka.sasl.username | quote }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "loopwatch.saslSecret" . }}
      key: {{ .Values.kafka.sasl.passwordKey }}
{{- end }}
{{- if eq (include "loopwatch.tls" .) "true" }}
{{- with .Values.kafka.tls }}
{{- if .existingSecret }}
- name: KAFKA_SSL_CAFILE
  value: /etc/loopwatch/kafka-tls/{{ .caFile }}
{{- if .certFile }}
- name: KAFKA_SSL_CERTFILE
  value: /etc/loopwatch/kafka-tls/{{ .certFile }}
{{- end }}
{{- if .keyFile }}
- name: KAFKA_SSL_KEYFILE
  value: /etc/loopwatch/kafka-tls/{{ .keyFile }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.config }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "loopwatch.tlsVolumeMount" -}}
{{- if and (eq (include "loopwatch.tls" .) "true") .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: /etc/loopwatch/kafka-tls
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "loopwatch.tlsVolume" -}}
{{- if and (eq (include "loopwatch.tls" .) "true") .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
{{- end }}
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "loopwatch.podSpecCommon" -}}
serviceAccountName: {{ include "loopwatch.serviceAccountName" . }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
