"""`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapperTest cases) and the principal of a client certificate."""
from __future__ import annotations

import pytest

from compatbroker.security.principal import ANONYMOUS, KafkaPrincipal
from compatbroker.security.principal_mapping import (NoMatchingRule, SslPrincipalMapper, principal_from_certificate,
                                                     subject_dn)


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_rules_apply_in_order():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("rules, expected", [
    ("", "[]"),
    ("DEFAULT", "[DEFAULT]"),
    ("RULE://", "[RULE:/]"),
    ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"),
    ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
    ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    (",   , , ,      , , ,   ", "[]"),
    (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
    ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
])
def test_rules_splitting(rules, expected):
    assert "[" + ", ".join(map(str, SslPrincipalMapper(rules).rules)) + "]" == expected


def test_escaped_commas_in_a_dn():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_a_reference_to_a_missing_group_stays_literal():
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1-$2/").name("CN=x") == "x-$2"
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$12/").name("CN=x") == "x2"  # Java reads $1, then a literal 2


def test_no_matching_rule():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x, rules \\[RULE:\\^CN=y\\$/y\\]"):
        SslPrincipalMapper("RULE:^CN=y$/y/").name("CN=x")


@pytest.fixture(scope="module")
def certificate_der(tmp_path_factory):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    from compatbroker.toolkit.certificates import CertificateAuthority

    ca = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    issued = ca.issue("alice", common_name="alice")
    with open(issued.cert_file, "rb") as file:
        return x509.load_pem_x509_certificate(file.read()).public_bytes(Encoding.DER)


def test_the_principal_of_a_certificate_is_its_mapped_subject(certificate_der):
    assert subject_dn(certificate_der) == "CN=alice"
    assert principal_from_certificate(certificate_der, SslPrincipalMapper()) == KafkaPrincipal("User", "CN=alice")
    assert principal_from_certificate(certificate_der, SslPrincipalMapper("RULE:^CN=(.*)$/$1/U")) == \
        KafkaPrincipal("User", "ALICE")
    assert principal_from_certificate(None, SslPrincipalMapper()) == ANONYMOUS
    with pytest.raises(ValueError, match="Failed to map name for 'CN=alice' based on SSL principal mapping rules"):
        principal_from_certificate(certificate_der, SslPrincipalMapper("RULE:^CN=bob$/bob/"))


def test_the_subject_is_written_as_javas_rfc_2253_form(tmp_path):
    """Keywords for CN, O, ...; other attributes as their OID and the hex of their DER value (emailAddress is an
    IA5String, tag 0x16); the most specific part first; escapes as in RFC 2253."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
                         x509.NameAttribute(NameOID.EMAIL_ADDRESS, "alice@example.com")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .sign(key, hashes.SHA256()))
    email = "alice@example.com".encode()
    assert subject_dn(certificate.public_bytes(Encoding.DER)) == \
        f"1.2.840.113549.1.9.1=#16{len(email):02x}{email.hex()},CN=alice,O=Acme\\, Inc,C=US"
