"""Dask over the network (issue 26 §6): a scheduler off this machine is reached over mutual TLS,
a cleartext one only when the config declares a trusted network; the fold-fit executor and the
partitioned runner pass the TLS settings to their client."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import ValidationError

from conf.models import RunnerConfig
from tasks.runners import chunk_executor, dask_security


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key, issuer_name, issuer_key, ca: bool):
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, str]:
    """A throw-away CA and one certificate it signed (scheduler, workers and client share it)."""
    root = tmp_path_factory.mktemp("pki")
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dpcausal-test-ca")])
    ca = _cert("dpcausal-test-ca", ca_key, ca_name, ca_key, ca=True)
    leaf = _cert("dask", key, ca_name, ca_key, ca=False)
    files = {"ca_file": root / "ca.pem", "cert": root / "cert.pem", "key": root / "key.pem"}
    files["ca_file"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(_pem_key(key))
    return {k: str(Path(v)) for k, v in files.items()}


@pytest.mark.parametrize("address, match", [
    ("tcp://10.0.0.5:8786", "cleartext to another machine"),
    ("10.0.0.5:8786", "cleartext to another machine"),
    ("tls://10.0.0.5:8786", r"needs runner.tls \(ca_file, cert, key\)"),
])
def test_an_unprotected_remote_scheduler_is_refused(address, match):
    with pytest.raises(ValidationError, match=match):
        RunnerConfig(kind="dask", address=address)


def test_loopback_declared_cleartext_and_tls_are_accepted(pki):
    assert RunnerConfig(kind="dask", address="tcp://127.0.0.1:8786").tls is None
    assert RunnerConfig(kind="dask", address="tcp://10.0.0.5:8786", cleartext=True).cleartext
    tls = RunnerConfig(kind="dask", address="tls://10.0.0.5:8786", tls=pki)
    security = dask_security(tls)
    assert security is not None and security.require_encryption
    assert security.tls_ca_file == pki["ca_file"] and security.tls_client_cert == pki["cert"]
    with pytest.raises(ValidationError, match="is not tls://"):
        RunnerConfig(kind="dask", address="tcp://127.0.0.1:8786", tls=pki)


def test_fold_work_reaches_a_tls_cluster_and_a_client_without_certificates_does_not(pki):
    from distributed import Client, LocalCluster
    from distributed.security import Security

    server = Security(tls_ca_file=pki["ca_file"], tls_scheduler_cert=pki["cert"],
                      tls_scheduler_key=pki["key"], tls_worker_cert=pki["cert"],
                      tls_worker_key=pki["key"], tls_client_cert=pki["cert"],
                      tls_client_key=pki["key"], require_encryption=True)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://",
                      host="127.0.0.1", security=server, dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        runner = RunnerConfig(kind="dask", address=address, tls=pki)
        with chunk_executor(runner) as executor:
            assert executor.submit(sum, [1, 2, 3]).result() == 6
        with pytest.raises((OSError, TypeError, ValueError)):
            Client(address.replace("tls://", "tcp://"), timeout="3s")
