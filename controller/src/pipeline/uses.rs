//! What a row reads or applies, declared on the row itself (`seq(..).using(step::KINDS)`);
//! [`super::kinds`] derives the tables' kind lists from it.

use crate::clusters::KindSpec;

/// How a row relates to a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read only: registered, so the read is served from the cache; its events wake nothing.
    Reads,
    /// Read by the name the CR gives it: its events wake the CRs that name it (the kind's
    /// reference index), here and on a target cluster.
    Names,
    /// Applied as the CR's child: its events wake the owner, and a deleting CR's remote sweep
    /// lists it on its target cluster.
    Owns,
}

/// One kind a row uses: how the handle caches it, and the row's role.
#[derive(Clone, Copy, Debug)]
pub struct Uses {
    /// The kind and its caching (a function: a `KindSpec` is built at run time).
    pub spec: fn() -> KindSpec,
    /// What the row does with it.
    pub role: Role,
}

/// A kind the row reads.
pub const fn reads(spec: fn() -> KindSpec) -> Uses {
    Uses {
        spec,
        role: Role::Reads,
    }
}

/// A kind the row reads by the name the CR gives it.
pub const fn names(spec: fn() -> KindSpec) -> Uses {
    Uses {
        spec,
        role: Role::Names,
    }
}

/// A kind the row applies as the CR's child.
pub const fn owns(spec: fn() -> KindSpec) -> Uses {
    Uses {
        spec,
        role: Role::Owns,
    }
}
