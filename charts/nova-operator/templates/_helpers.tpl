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

{{/*
A component's image reference: repository@digest when a digest is set (the tag is then
ignored), else repository:tag; call with (list $ .Values.controller.image).
*/}}
{{- define "nova-operator.image" -}}
{{- $ := index . 0 }}{{ $image := index . 1 }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default $.Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount one component runs under; call with (list $ "controller" .Values.controller).
serviceAccount.name when set (created under that name, or pre-created when create is false),
else <fullname>-<component>; create=false without a name is refused.
*/}}
{{- define "nova-operator.serviceAccountName" -}}
{{- $ := index . 0 }}{{ $component := index . 1 }}{{ $sa := (index . 2).serviceAccount }}
{{- if $sa.name }}
{{- $sa.name }}
{{- else if $sa.create }}
{{- include "nova-operator.fullname" $ }}-{{ $component }}
{{- else }}
{{- fail (printf "%s.serviceAccount.name must name the pre-created ServiceAccount when %s.serviceAccount.create is false" $component $component) }}
{{- end }}
{{- end }}

{{/*
One component's ServiceAccount, unless serviceAccount.create is false; call with
(list $ "controller" .Values.controller).
*/}}
{{- define "nova-operator.serviceAccount" -}}
{{- $ := index . 0 }}{{ $component := index . 1 }}{{ $values := index . 2 }}
{{- if $values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "nova-operator.serviceAccountName" . }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "nova-operator.componentLabels" (list $ $component) | nindent 4 }}
  {{- with $values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The pods' imagePullSecrets (top-level imagePullSecrets: names, or {name: ...}). */}}
{{- define "nova-operator.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A component's container security context (<component>.containerSecurityContext, by default the
hardened one: no privilege escalation, read-only root filesystem, non-root, no capabilities,
RuntimeDefault seccomp); call with (list $ .Values.controller).
*/}}
{{- define "nova-operator.containerSecurityContext" -}}
{{- toYaml ((index . 1).containerSecurityContext | default dict) }}
{{- end }}

{{/*
A component's pod security context (<component>.podSecurityContext, by default the images'
non-root user 65532 and RuntimeDefault seccomp). With openshift=true, runAsUser and runAsGroup
are left out: the restricted SCC assigns the namespace's UID and GID. Call with
(list $ .Values.controller).
*/}}
{{- define "nova-operator.podSecurityContext" -}}
{{- $ := index . 0 }}{{ $sc := (index . 1).podSecurityContext | default dict }}
{{- if $.Values.openshift }}
{{- $sc = omit $sc "runAsUser" "runAsGroup" }}
{{- end }}
{{- toYaml $sc }}
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
