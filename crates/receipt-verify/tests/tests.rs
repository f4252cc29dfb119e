//! Integration tests of receipt-verify.
