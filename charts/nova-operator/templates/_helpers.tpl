{{/* The chart's name. */}}
{{- define "nova-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: the release name, with the chart name unless it holds it. */}}
{{- define "nova-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "nova-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "nova-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The selector of one component's pods; call with (list $ "controller"). */}}
{{- define "nova-operator.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "nova-operator.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* The labels of one component's objects; call with (list $ "controller"). */}}
{{- define "nova-operator.componentLabels" -}}
{{ include "nova-operator.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* The namespace the controller watches in the namespace scope. */}}
{{- define "nova-operator.watchNamespace" -}}
{{- default .Release.Namespace .Values.rbac.watchNamespace }}
{{- end }}

{{/* A component's image reference; call with (list $ .Values.controller.image). */}}
{{- define "nova-operator.image" -}}
{{- $ := index . 0 }}{{ $image := index . 1 }}
{{- printf "%s:%s" $image.repository (default $.Chart.AppVersion $image.tag) }}
{{- end }}

{{/* The hardened container security context both binaries run with. */}}
{{- define "nova-operator.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The pod security context both binaries run with (the images' non-root user). */}}
{{- define "nova-operator.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
Placement of one component's pods: node selector, tolerations, affinity, priority class and
topology spread (the component's selector is filled in when a constraint has none); call with
(list $ "controller" .Values.controller).
*/}}
{{- define "nova-operator.placement" -}}
{{- $ := index . 0 }}{{ $component := index . 1 }}{{ $values := index . 2 }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
  - {{- toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" (include "nova-operator.selector" (list $ $component) | fromYaml)))) | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}

{{/* A PodDisruptionBudget for one component; call with (list $ "controller" .Values.controller). */}}
{{- define "nova-operator.pdb" -}}
{{- $ := index . 0 }}{{ $component := index . 1 }}{{ $values := index . 2 }}
{{- if and $values.podDisruptionBudget.enabled (gt (int $values.replicas) 1) }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "nova-operator.fullname" $ }}-{{ $component }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "nova-operator.componentLabels" (list $ $component) | nindent 4 }}
spec:
  maxUnavailable: {{ $values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "nova-operator.selector" (list $ $component) | nindent 6 }}
{{- end }}
{{- end }}

{{/* The metrics Service of one component; call with (list $ "controller" port). */}}
{{- define "nova-operator.metricsService" -}}
{{- $ := index . 0 }}{{ $component := index . 1 -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "nova-operator.fullname" $ }}-{{ $component }}-metrics
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "nova-operator.componentLabels" (list $ $component) | nindent 4 }}
    nova.openstack.c5c3.io/metrics: "true"
spec:
  selector:
    {{- include "nova-operator.selector" (list $ $component) | nindent 4 }}
  ports:
    - name: metrics
      port: {{ index . 2 }}
      targetPort: metrics
      protocol: TCP
{{- end }}
