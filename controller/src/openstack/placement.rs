//! The Placement trait calls of a pass (`novacompute.md` §7.4), at microversion 1.6.

use http::Method;

use super::{Api, Client, OpenStackError, segment};

/// How ensuring a custom trait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraitEnsured {
    /// 201: this call created it (the pool records it as its own).
    Created,
    /// 204: it existed already (someone else's).
    Existed,
}

/// How deleting a custom trait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraitDeletion {
    /// 204, or 404 (already gone).
    Deleted,
    /// 409: a resource provider still carries it.
    InUse,
}

impl Client {
    /// `PUT /traits/{name}`.
    pub async fn ensure_trait(&self, name: &str) -> Result<TraitEnsured, OpenStackError> {
        let path = format!("/traits/{}", segment(name));
        match self
            .status(Api::Placement, Method::PUT, &path, None, &[201, 204])
            .await?
        {
            201 => Ok(TraitEnsured::Created),
            _ => Ok(TraitEnsured::Existed),
        }
    }

    /// `DELETE /traits/{name}`.
    pub async fn delete_trait(&self, name: &str) -> Result<TraitDeletion, OpenStackError> {
        let path = format!("/traits/{}", segment(name));
        match self
            .status(
                Api::Placement,
                Method::DELETE,
                &path,
                None,
                &[204, 404, 409],
            )
            .await?
        {
            409 => Ok(TraitDeletion::InUse),
            _ => Ok(TraitDeletion::Deleted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{Fake, client};
    use super::*;

    #[tokio::test]
    async fn traits_go_to_the_catalogs_placement_at_1_6() {
        let fake = Fake::new()
            .answer("PUT", "/traits/CUSTOM_A", 201, "")
            .answer("PUT", "/traits/CUSTOM_A", 204, "")
            .answer("PUT", "/traits/HW_CPU_X86_AVX", 400, "not a custom trait")
            .answer("DELETE", "/traits/CUSTOM_A", 204, "")
            .answer("DELETE", "/traits/CUSTOM_B", 404, "")
            .answer("DELETE", "/traits/CUSTOM_C", 409, "in use");
        let c = client(&fake, None);
        assert_eq!(c.ensure_trait("CUSTOM_A").await, Ok(TraitEnsured::Created));
        assert_eq!(c.ensure_trait("CUSTOM_A").await, Ok(TraitEnsured::Existed));
        assert_eq!(
            c.ensure_trait("HW_CPU_X86_AVX")
                .await
                .expect_err("400")
                .to_string(),
            "PUT /traits/HW_CPU_X86_AVX: HTTP 400: not a custom trait"
        );
        assert_eq!(c.delete_trait("CUSTOM_A").await, Ok(TraitDeletion::Deleted));
        assert_eq!(c.delete_trait("CUSTOM_B").await, Ok(TraitDeletion::Deleted));
        assert_eq!(c.delete_trait("CUSTOM_C").await, Ok(TraitDeletion::InUse));
        assert_eq!(
            fake.calls(),
            [
                "PUT /traits/CUSTOM_A",
                "PUT /traits/CUSTOM_A",
                "PUT /traits/HW_CPU_X86_AVX",
                "DELETE /traits/CUSTOM_A",
                "DELETE /traits/CUSTOM_B",
                "DELETE /traits/CUSTOM_C",
            ]
        );
        let seen = fake.requests();
        assert_eq!(
            seen[1].target(),
            "PUT http://placement.test:8778/traits/CUSTOM_A"
        );
        assert_eq!(
            seen[1].header("OpenStack-API-Version"),
            Some("placement 1.6")
        );
        assert_eq!(seen[1].header("X-OpenStack-Nova-API-Version"), None);
        assert_eq!(seen[1].body, "");
    }

    #[tokio::test]
    async fn the_override_wins_and_no_endpoint_fails_the_call() {
        let fake = Fake::new().answer("PUT", "/placement/traits/CUSTOM_A", 204, "");
        let c = client(&fake, Some("http://placement.override/placement/"));
        assert_eq!(c.ensure_trait("CUSTOM_A").await, Ok(TraitEnsured::Existed));
        assert_eq!(
            fake.requests()[1].target(),
            "PUT http://placement.override/placement/traits/CUSTOM_A"
        );

        let bare = Fake::new().login(201, Some(super::super::fake::TOKEN), r#"{"token": {}}"#);
        assert!(matches!(
            client(&bare, None).ensure_trait("CUSTOM_A").await,
            Err(OpenStackError::NoPlacementEndpoint(_))
        ));
    }
}
