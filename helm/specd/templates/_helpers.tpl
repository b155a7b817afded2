{{/*
Prefix of every object name: the release name unless fullnameOverride. 40 characters leave room
for the longest suffix ("-orchestrator") within a 63-character DNS label.
*/}}
{{- define "specd.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component. Call with (dict "root" $ "component" NAME). */}}
{{- define "specd.selectorLabels" -}}
app.kubernetes.io/name: specd
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* All labels of one component's objects. Call with (dict "root" $ "component" NAME). */}}
{{- define "specd.labels" -}}
{{ include "specd.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: specd
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of objects that belong to no one component (the dashboards, the rules). */}}
{{- define "specd.commonLabels" -}}
app.kubernetes.io/name: specd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: specd
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "specd.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The `model` metric label. */}}
{{- define "specd.modelName" -}}
{{- .Values.models.name | default .Values.models.target -}}
{{- end -}}

{{/*
The models volume (the `models` entry of a pod's volumes, without its name). hasKey, not `with`:
the defaults hold no hostPath, and a missing key must not be an error in strict rendering.
*/}}
{{- define "specd.modelsVolume" -}}
{{- if hasKey .Values.models.volume "persistentVolumeClaim" -}}
persistentVolumeClaim:
  claimName: {{ .Values.models.volume.persistentVolumeClaim.claimName | quote }}
  readOnly: true
{{- else if hasKey .Values.models.volume "hostPath" -}}
hostPath:
  path: {{ .Values.models.volume.hostPath.path | quote }}
  type: {{ .Values.models.volume.hostPath.type | quote }}
{{- else }}
{{- fail "models.volume needs persistentVolumeClaim or hostPath" }}
{{- end }}
{{- end -}}

{{/*
terminationGracePeriodSeconds: the grace period starts with preStop, so it must cover the preStop
sleep, then the drain (--shutdown-timeout), then a margin for the process to exit.
*/}}
{{- define "specd.terminationGracePeriodSeconds" -}}
{{- add .Values.lifecycle.preStopSleepSeconds .Values.serving.shutdownTimeoutSeconds .Values.lifecycle.terminationGraceMarginSeconds -}}
{{- end -}}

{{/*
The preStop hook: the kubelet's own sleep action where the API has it (beta and on by default
from 1.30), else the image's /bin/sleep.
*/}}
{{- define "specd.lifecycle" -}}
preStop:
{{- if semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}
  sleep:
    seconds: {{ .Values.lifecycle.preStopSleepSeconds }}
{{- else }}
  exec:
    command: ["/bin/sleep", {{ .Values.lifecycle.preStopSleepSeconds | quote }}]
{{- end }}
{{- end -}}

{{/*
The in-cluster DNS name of one of the release's Services, as the TLS certificate must carry it.
Call with (dict "root" $ "service" SUFFIX), e.g. "pairs".
*/}}
{{- define "specd.serviceHost" -}}
{{- printf "%s-%s.%s.svc" (include "specd.fullname" .root) .service .root.Release.Namespace -}}
{{- end -}}

{{/* Where the TLS files are mounted (tls.secretName; tls.caSecretName). */}}
{{- define "specd.tlsDir" -}}/etc/specd/tls{{- end -}}

{{/* The PEM roots of the release's certificates: tls.caSecretName's ca.crt, else the TLS Secret's. */}}
{{- define "specd.tlsCAFile" -}}
{{- if .Values.tls.caSecretName -}}/etc/specd/tls-ca/ca.crt{{- else -}}{{ include "specd.tlsDir" . }}/ca.crt{{- end -}}
{{- end -}}

{{/* The flags serving gRPC (and the HTTP API) over TLS with the Secret's certificate. */}}
{{- define "specd.tlsServeArgs" -}}
- --tls-cert={{ include "specd.tlsDir" . }}/tls.crt
- --tls-key={{ include "specd.tlsDir" . }}/tls.key
{{- end -}}

{{/* Read-only mounts of the TLS Secrets (a container's volumeMounts entries), with tls.secretName. */}}
{{- define "specd.tlsMounts" -}}
{{- if .Values.tls.secretName -}}
- name: tls
  mountPath: {{ include "specd.tlsDir" . }}
  readOnly: true
{{- if .Values.tls.caSecretName }}
- name: tls-ca
  mountPath: /etc/specd/tls-ca
  readOnly: true
{{- end }}
{{- end -}}
{{- end -}}

{{/*
The TLS Secrets as a pod's volumes entries, with tls.secretName. Mode 0440 (288; decimal, which
YAML 1.1 and 1.2 read alike) with the pod's fsGroup: the private key is for the container's user.
*/}}
{{- define "specd.tlsVolumes" -}}
{{- if .Values.tls.secretName -}}
- name: tls
  secret:
    secretName: {{ .Values.tls.secretName | quote }}
    defaultMode: 288
{{- if .Values.tls.caSecretName }}
- name: tls-ca
  secret:
    secretName: {{ .Values.tls.caSecretName | quote }}
    defaultMode: 288
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}
{{- end -}}

{{/*
How the kubelet checks one container: grpc.health.v1 (service "") on its gRPC port. The kubelet's
own grpc probe speaks plain text only, so under TLS the image's specctl asks instead, checking
the certificate against the Service name `serverName` and presenting the pod's own certificate
(which mutual TLS requires). Call with (dict "root" $ "port" PORT "serverName" NAME).
*/}}
{{- define "specd.probeCheck" -}}
{{- if .root.Values.tls.secretName -}}
exec:
  command:
    - /usr/local/bin/specctl
    - --addr=127.0.0.1:{{ .port }}
    - --tls-ca={{ include "specd.tlsCAFile" .root }}
    - --tls-server-name={{ .serverName }}
    - --tls-cert={{ include "specd.tlsDir" .root }}/tls.crt
    - --tls-key={{ include "specd.tlsDir" .root }}/tls.key
    - health
{{- else -}}
grpc:
  port: {{ .port }}
{{- end -}}
{{- end -}}

{{/*
The startup, readiness and liveness probes of one container (see specd.probeCheck). Call with
(dict "root" $ "port" PORT "serverName" NAME).
*/}}
{{- define "specd.probes" -}}
startupProbe:
  {{- include "specd.probeCheck" . | nindent 2 }}
  {{- toYaml .root.Values.probes.startup | nindent 2 }}
readinessProbe:
  {{- include "specd.probeCheck" . | nindent 2 }}
  {{- toYaml .root.Values.probes.readiness | nindent 2 }}
livenessProbe:
  {{- include "specd.probeCheck" . | nindent 2 }}
  {{- toYaml .root.Values.probes.liveness | nindent 2 }}
{{- end -}}

{{/*
The resources of a pair container: the user's requests/limits plus its GPU. Call with
(dict "root" $ "resources" MAP "devicePluginGPU" BOOL). With gpu.sharing=dra every pair container
names the pod's one claim; otherwise devicePluginGPU adds one `gpu.resourceName` to the limits
(the device plugin's request defaults to the limit).
*/}}
{{- define "specd.pairResources" -}}
{{- $resources := deepCopy (.resources | default dict) -}}
{{- if eq .root.Values.pairs.gpu.sharing "dra" -}}
{{- $_ := set $resources "claims" (list (dict "name" "gpu")) -}}
{{- else if .devicePluginGPU -}}
{{- $limits := deepCopy (get $resources "limits" | default dict) -}}
{{- $_ := set $limits .root.Values.pairs.gpu.resourceName 1 -}}
{{- $_ := set $resources "limits" $limits -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end -}}

{{/*
The API key of the public APIs (orchestrator, trainer) from apiKey.secretName, as specd serve reads
it: SPECD_API_KEY, never a flag (`ps` would show it). Renders nothing without a Secret.
*/}}
{{- define "specd.apiKeyEnv" -}}
{{- with .Values.apiKey.secretName -}}
env:
  - name: SPECD_API_KEY
    valueFrom:
      secretKeyRef:
        name: {{ . | quote }}
        key: {{ $.Values.apiKey.secretKey | quote }}
{{- end -}}
{{- end -}}

{{/* Volume mounts shared by every container: the models and a writable /tmp. */}}
{{- define "specd.baseMounts" -}}
- name: models
  mountPath: /models
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/*
The drafter container's --drafter: models.drafter under /models, or the suffix drafter
("suffix", or "suffix+DIR" combined with the DFlash drafter in DIR under /models).
*/}}
{{- define "specd.drafterFlag" -}}
{{- $drafter := .Values.models.drafter -}}
{{- if eq $drafter "suffix" -}}
--drafter=suffix
{{- else if hasPrefix "suffix+" $drafter -}}
--drafter=suffix+/models/{{ trimPrefix "suffix+" $drafter }}
{{- else -}}
--drafter=/models/{{ $drafter }}
{{- end -}}
{{- end -}}
