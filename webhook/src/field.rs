//! Field errors in the API server's own shape (`k8s.io/apimachinery/pkg/util/validation/field`)
//! and the `Invalid` status `errors.NewInvalid` builds from them.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// The API group both kinds belong to.
pub const GROUP: &str = "nova.openstack.c5c3.io";

/// `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueForbidden`.
    Forbidden,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueNotFound`.
    NotFound,
    /// `FieldValueDuplicate`.
    Duplicate,
    /// `FieldValueTooLong`.
    TooLong,
    /// `InternalError`.
    Internal,
}

impl ErrorType {
    /// The cause type of `details.causes[].reason`.
    pub fn cause(self) -> &'static str {
        match self {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::Internal => "InternalError",
        }
    }

    /// `ErrorType.String()`.
    pub fn label(self) -> &'static str {
        match self {
            ErrorType::Invalid => "Invalid value",
            ErrorType::Required => "Required value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::NotFound => "Not found",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooLong => "Too long",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// The offending value as `field.Error.BadValue` renders it.
#[derive(Clone, Debug, PartialEq)]
pub enum BadValue {
    /// The value is not shown (`field.OmitValueType`): used wherever the value could carry a
    /// credential (URLs, extraConfig values) or is a whole block.
    Omitted,
    /// A string, rendered with Go's `%q`.
    Str(String),
    /// An integer, rendered bare.
    Int(i64),
    /// A boolean, rendered bare.
    Bool(bool),
    /// Anything else, rendered as compact JSON.
    Json(Value),
}

impl BadValue {
    fn render(&self) -> Option<String> {
        match self {
            BadValue::Omitted => None,
            BadValue::Str(s) => Some(go_quote(s)),
            BadValue::Int(i) => Some(i.to_string()),
            BadValue::Bool(b) => Some(b.to_string()),
            BadValue::Json(v) => Some(serde_json::to_string(v).unwrap_or_default()),
        }
    }
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::Str(s.to_owned())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::Str(s)
    }
}

impl From<&String> for BadValue {
    fn from(s: &String) -> Self {
        BadValue::Str(s.clone())
    }
}

impl From<i64> for BadValue {
    fn from(i: i64) -> Self {
        BadValue::Int(i)
    }
}

impl From<i32> for BadValue {
    fn from(i: i32) -> Self {
        BadValue::Int(i.into())
    }
}

/// One `field.Error`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The error type.
    pub kind: ErrorType,
    /// The field path, `spec.a.b[0].c[key]`.
    pub field: String,
    /// The offending value.
    pub value: BadValue,
    /// The explanation.
    pub detail: String,
}

impl FieldError {
    /// `field.Invalid`.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: value.into(),
            detail: detail.into(),
        }
    }

    /// `field.Invalid` with the value omitted.
    pub fn invalid_omitted(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: BadValue::Omitted,
            detail: detail.into(),
        }
    }

    /// `field.Required`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Required,
            field: field.into(),
            value: BadValue::Str(String::new()),
            detail: detail.into(),
        }
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Forbidden,
            field: field.into(),
            value: BadValue::Str(String::new()),
            detail: detail.into(),
        }
    }

    /// `field.NotSupported`: `supported values: "a", "b"`.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        supported: &[&str],
    ) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self {
            kind: ErrorType::NotSupported,
            field: field.into(),
            value: value.into(),
            detail,
        }
    }

    /// `field.NotFound`.
    pub fn not_found(field: impl Into<String>, value: impl Into<BadValue>) -> Self {
        Self {
            kind: ErrorType::NotFound,
            field: field.into(),
            value: value.into(),
            detail: String::new(),
        }
    }

    /// `field.Duplicate`.
    pub fn duplicate(field: impl Into<String>, value: impl Into<BadValue>) -> Self {
        Self {
            kind: ErrorType::Duplicate,
            field: field.into(),
            value: value.into(),
            detail: String::new(),
        }
    }

    /// `field.InternalError`.
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Internal,
            field: field.into(),
            value: BadValue::Omitted,
            detail: detail.into(),
        }
    }

    /// `Error.ErrorBody()`: everything after the field path.
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_owned();
        match self.kind {
            ErrorType::Required
            | ErrorType::Forbidden
            | ErrorType::TooLong
            | ErrorType::Internal => {}
            _ => {
                if let Some(value) = self.value.render() {
                    let _ = write!(s, ": {value}");
                }
            }
        }
        if !self.detail.is_empty() {
            let _ = write!(s, ": {}", self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Go's `strconv.Quote`, the `%q` verb of the messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let cp = c as u32;
                if cp <= 0xffff {
                    let _ = write!(out, "\\u{cp:04x}");
                } else {
                    let _ = write!(out, "\\U{cp:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A field path under construction: `spec`, `.child`, `[index]`, `[key]`. Each step borrows
/// its parent and its name, so building one costs no allocation: rules build a path for every
/// field they visit (about 130 per Example Nova review), and only a path a violation names is
/// ever rendered.
#[derive(Clone, Copy)]
pub struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    step: Step<'a>,
}

/// One step of a [`Path`].
#[derive(Clone, Copy)]
enum Step<'a> {
    Root(&'a str),
    Child(&'a str),
    Index(usize),
    Key(&'a str),
}

impl<'a> Path<'a> {
    /// A root path.
    pub const fn new(root: &'a str) -> Self {
        Path {
            parent: None,
            step: Step::Root(root),
        }
    }

    /// `path.Child(name)`.
    pub fn child(&'a self, name: &'a str) -> Self {
        self.then(Step::Child(name))
    }

    /// `path.Index(i)`.
    pub fn index(&'a self, i: usize) -> Self {
        self.then(Step::Index(i))
    }

    /// `path.Key(k)`.
    pub fn key(&'a self, k: &'a str) -> Self {
        self.then(Step::Key(k))
    }

    fn then(&'a self, step: Step<'a>) -> Self {
        Path {
            parent: Some(self),
            step,
        }
    }

    /// The rendered path.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(64);
        let _ = self.write(&mut out);
        out
    }

    fn write(&self, f: &mut impl std::fmt::Write) -> std::fmt::Result {
        if let Some(parent) = self.parent {
            parent.write(f)?;
        }
        match self.step {
            Step::Root(root) => f.write_str(root),
            Step::Child(name) => {
                f.write_char('.')?;
                f.write_str(name)
            }
            Step::Index(i) => write!(f, "[{i}]"),
            Step::Key(k) => {
                f.write_char('[')?;
                f.write_str(k)?;
                f.write_char(']')
            }
        }
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write(f)
    }
}

impl std::fmt::Debug for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Path({:?})", self.render())
    }
}

impl From<Path<'_>> for String {
    fn from(p: Path<'_>) -> Self {
        p.render()
    }
}

impl From<&Path<'_>> for String {
    fn from(p: &Path<'_>) -> Self {
        p.render()
    }
}

/// One `metav1.StatusCause`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusCause {
    /// The cause type (`FieldValueInvalid`, ...).
    pub reason: String,
    /// The error body.
    pub message: String,
    /// The field path.
    pub field: String,
}

/// `metav1.StatusDetails`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusDetails {
    /// The object's name.
    pub name: String,
    /// The API group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// One cause per field error.
    pub causes: Vec<StatusCause>,
}

/// The `metav1.Status` of a rejected admission.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    /// Always `Failure` here.
    pub status: String,
    /// The human-readable message.
    pub message: String,
    /// The reason (`Invalid`, `BadRequest`, `InternalError`).
    pub reason: String,
    /// Per-field details, for `Invalid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP-style code.
    pub code: u16,
}

impl Status {
    /// `errors.NewInvalid(GroupKind{GROUP, kind}, name, errs)`.
    pub fn invalid(kind: &str, name: &str, errors: &Violations) -> Self {
        let causes = errors
            .iter()
            .map(|e| StatusCause {
                reason: e.kind.cause().to_owned(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect();
        let qualified = format!("{kind}.{GROUP}");
        let message = match aggregate(errors) {
            None => format!("{qualified} {} is invalid", go_quote(name)),
            Some(agg) => format!("{qualified} {} is invalid: {agg}", go_quote(name)),
        };
        Status {
            status: "Failure".into(),
            message,
            reason: "Invalid".into(),
            details: Some(StatusDetails {
                name: name.to_owned(),
                group: GROUP.to_owned(),
                kind: kind.to_owned(),
                causes,
            }),
            code: 422,
        }
    }

    /// A `BadRequest` (400) status.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Status {
            status: "Failure".into(),
            message: message.into(),
            reason: "BadRequest".into(),
            details: None,
            code: 400,
        }
    }

    /// An `InternalError` (500) status.
    pub fn internal(message: impl Into<String>) -> Self {
        Status {
            status: "Failure".into(),
            message: message.into(),
            reason: "InternalError".into(),
            details: None,
            code: 500,
        }
    }
}

/// The most violations one denial lists. A denial of every violation costs far more than its
/// body: 20,000 empty tolerations (61 KB) were answered with 7.5 MB, so 3 MiB of them would
/// have taken hundreds of MiB to answer, past the review budget and the pod's memory limit.
/// A hundred is more than any hand-written object violates; the rest are counted.
pub const MAX_LISTED_VIOLATIONS: usize = 100;

/// The violations of one object: the first [`MAX_LISTED_VIOLATIONS`] kept, the rest counted.
/// The rules push into it as into a list; what it drops is never rendered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Violations {
    listed: Vec<FieldError>,
    unlisted: usize,
}

impl Violations {
    /// Records a violation: listed while fewer than the limit are, counted after.
    pub fn push(&mut self, error: FieldError) {
        if self.listed.len() < MAX_LISTED_VIOLATIONS {
            self.listed.push(error);
        } else {
            self.unlisted += 1;
        }
    }

    /// Whether nothing is violated.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    /// The listed violations.
    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.listed.iter()
    }

    /// How many violations were not listed.
    pub fn unlisted(&self) -> usize {
        self.unlisted
    }
}

impl From<Vec<FieldError>> for Violations {
    fn from(errors: Vec<FieldError>) -> Self {
        let mut violations = Violations::default();
        for error in errors {
            violations.push(error);
        }
        violations
    }
}

/// `ErrorList.ToAggregate().Error()`: duplicates dropped, one error bare, several in brackets;
/// violations past the listed ones are counted at the end (`and 42 more not listed`).
/// Linear in the errors: a body of many small violations must not cost quadratic time.
pub fn aggregate(errors: &Violations) -> Option<String> {
    let mut distinct = std::collections::HashSet::with_capacity(errors.listed.len());
    let mut seen: Vec<String> = Vec::with_capacity(errors.listed.len() + 1);
    for e in errors.iter() {
        let msg = e.to_string();
        if distinct.insert(msg.clone()) {
            seen.push(msg);
        }
    }
    if errors.unlisted > 0 {
        seen.push(format!("and {} more not listed", errors.unlisted));
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_apimachinery() {
        assert_eq!(
            FieldError::invalid("spec.x", "v", "msg").to_string(),
            r#"spec.x: Invalid value: "v": msg"#
        );
        assert_eq!(
            FieldError::required("spec.x", "msg").to_string(),
            "spec.x: Required value: msg"
        );
        assert_eq!(
            FieldError::required("spec.x", "").to_string(),
            "spec.x: Required value"
        );
        assert_eq!(
            FieldError::forbidden("spec.x", "msg").to_string(),
            "spec.x: Forbidden: msg"
        );
        assert_eq!(
            FieldError::not_supported("spec.x", "v", &["a", "b"]).to_string(),
            r#"spec.x: Unsupported value: "v": supported values: "a", "b""#
        );
        assert_eq!(
            FieldError::invalid("spec.r", 0, "m").to_string(),
            "spec.r: Invalid value: 0: m"
        );
        assert_eq!(
            FieldError::invalid_omitted("spec.u", "m").to_string(),
            "spec.u: Invalid value: m"
        );
        assert_eq!(
            FieldError::not_found("spec.p", "pc").to_string(),
            r#"spec.p: Not found: "pc""#
        );
        assert_eq!(
            FieldError::duplicate("spec.h[1].node", "n").to_string(),
            r#"spec.h[1].node: Duplicate value: "n""#
        );
        assert_eq!(
            FieldError::invalid("spec.m", BadValue::Json(serde_json::json!({"a": "b"})), "m")
                .to_string(),
            r#"spec.m: Invalid value: {"a":"b"}: m"#
        );
    }

    #[test]
    fn a_denial_lists_a_hundred_violations_and_counts_the_rest() {
        let mut violations = Violations::default();
        for i in 0..MAX_LISTED_VIOLATIONS + 42 {
            violations.push(FieldError::required(format!("spec.t[{i}]"), ""));
        }
        assert_eq!(violations.iter().count(), MAX_LISTED_VIOLATIONS);
        assert_eq!(violations.unlisted(), 42);
        let message = aggregate(&violations).expect("a message");
        assert!(
            message.starts_with("[spec.t[0]: Required value, "),
            "{message}"
        );
        assert!(
            message.ends_with("spec.t[99]: Required value, and 42 more not listed]"),
            "{message}"
        );
        let status = Status::invalid("Nova", "n", &violations);
        let causes = status.details.expect("details").causes;
        assert_eq!(
            causes.len(),
            MAX_LISTED_VIOLATIONS,
            "a cause per listed violation"
        );
    }

    #[test]
    fn paths_render_like_apimachinery() {
        let root = Path::new("spec");
        let block = root.child("hosts");
        let host = block.index(1);
        assert_eq!(
            String::from(host.child("labels").key("a.b/c")),
            "spec.hosts[1].labels[a.b/c]"
        );
        assert_eq!(format!("{root}"), "spec");
        assert_eq!(format!("{:?}", block), r#"Path("spec.hosts")"#);
    }

    #[test]
    fn quoting_matches_go() {
        assert_eq!(go_quote("a\nb\r\"c\"\\"), r#""a\nb\r\"c\"\\""#);
        assert_eq!(go_quote("\u{1}é"), "\"\\x01é\"");
    }

    #[test]
    fn the_aggregate_drops_duplicates_and_brackets_several() {
        let a = FieldError::required("spec.a", "x");
        let b = FieldError::required("spec.b", "y");
        let list = |errors: &[&FieldError]| {
            Violations::from(errors.iter().map(|&e| e.clone()).collect::<Vec<_>>())
        };
        assert_eq!(aggregate(&list(&[])), None);
        assert_eq!(
            aggregate(&list(&[&a])).unwrap(),
            "spec.a: Required value: x"
        );
        assert_eq!(
            aggregate(&list(&[&a, &a])).unwrap(),
            "spec.a: Required value: x"
        );
        assert_eq!(
            aggregate(&list(&[&a, &b])).unwrap(),
            "[spec.a: Required value: x, spec.b: Required value: y]"
        );
        let status = Status::invalid("Nova", "n", &list(&[&a]));
        assert_eq!(
            status.message,
            r#"Nova.nova.openstack.c5c3.io "n" is invalid: spec.a: Required value: x"#
        );
    }
}
