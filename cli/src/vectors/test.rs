use super::*;

const IB_NO_GRH: &str = r#"{"name":"01-ib-no-grh-flag","port":{"num":1,"link_layer":"infiniband","gid_tbl_len":4,"gids":[{"index":0,"gid":"fe800000000000000002c90300012345","type":"ib"},{"index":2,"gid":"fe800000000000000002c90300099999","type":"ib"}]},"wc":{"wc_flags":0,"slid":7,"sl":3,"dlid_path_bits":2,"src_qp":5,"pkey_index":0},"grh":"6001234500001b40fe800000000000000002c90300011111fe800000000000000002c90300099999","expect":{"ret":0,"errno":null,"ah_attr":{"dlid":7,"sl":3,"src_path_bits":2,"static_rate":0,"is_global":0,"port_num":1,"grh":{"dgid":"00000000000000000000000000000000","flow_label":74565,"sgid_index":0,"hop_limit":0,"traffic_class":0}},"gid_queries":0,"signal":null}}"#;

#[test]
fn hex_round_trip_and_errors() {
    let h = Hex::<2>::parse("aB0f").unwrap();
    assert_eq!(h.0, [0xab, 0x0f]);
    assert_eq!(h.to_string(), "ab0f");
    assert!(Hex::<2>::parse("ab0").is_err());
    assert!(Hex::<2>::parse("zz00").is_err());
    assert!(Hex::<2>::parse("éa").is_err());
}

#[test]
fn passes_and_reports_mismatches() {
    let cases = load_str(IB_NO_GRH, None).unwrap();
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].case.check().unwrap(), vec![]);

    let bad = IB_NO_GRH.replace("\"flow_label\":74565", "\"flow_label\":1");
    let cases = load_str(&bad, None).unwrap();
    let m = cases[0].case.check().unwrap();
    assert_eq!(
        m,
        vec![Mismatch {
            case: "01-ib-no-grh-flag".into(),
            field: "ah_attr.grh.flow_label".into(),
            expected: "1".into(),
            got: "74565".into(),
        }]
    );
}

#[test]
fn bad_input_is_an_error_with_a_line() {
    let text = format!("\n{IB_NO_GRH}\n{{\"name\": 3}}\n");
    let e = load_str(&text, None).unwrap_err();
    assert_eq!(e.line, 3);
    let e = load_str(&IB_NO_GRH.replace("\"ib\"}]", "\"ib\"}],\"x\":1").replace("infiniband", "token-ring"), None)
        .unwrap_err();
    assert_eq!(e.line, 1);
    // A libibverbs expectation read as kernel.
    let e = load_str(IB_NO_GRH, Some(Profile::Kernel)).unwrap_err();
    assert!(e.message.contains("kernel"), "{e}");
}

#[test]
fn never_panics_on_damaged_lines() {
    // Every prefix, and every single-byte change to a few bytes, of a valid
    // line: an error or a result, never a panic.
    for cut in 0..IB_NO_GRH.len() {
        if let Ok(cases) = load_str(&IB_NO_GRH[..cut], None) {
            for c in cases {
                let _ = c.case.check();
            }
        }
    }
    let bytes = IB_NO_GRH.as_bytes();
    for pos in (0..bytes.len()).step_by(3) {
        for b in [b'0', b'9', b'f', b'-', b'"', b'{', b'}', b'x', b' '] {
            let mut m = bytes.to_vec();
            m[pos] = b;
            let Ok(text) = core::str::from_utf8(&m) else { continue };
            if let Ok(cases) = load_str(text, None) {
                for c in cases {
                    let _ = c.case.check();
                }
            }
        }
    }
}

#[test]
fn edge_case_document_both_profiles() {
    let port = r#"{"num":1,"link_layer":"ethernet","gid_tbl_len":16,"gids":[
        {"index":3,"gid":"00000000000000000000ffffc0a8010a","type":"roce_v2","netdev_vlan":null}]}"#;
    let grh = "00000000000000000000000000000000000000004500003c000040004011b742c0a80114c0a8010a";
    let doc = format!(
        r#"{{
  "description": "test",
  "cases": [
{{"id": 1, "name": "v2-ipv4-basic", "port": {port}, "wc": {{"wc_flags": 1, "slid": 0, "sl": 0, "dlid_path_bits": 0}},
  "grh": "{grh}",
  "libibverbs": {{"ret": 0, "errno": null, "errno_left_on_success": null, "gid_queries": 8,
    "ah_attr": {{"is_global": 1, "dlid": 0, "sl": 0, "src_path_bits": 0, "static_rate": 0, "port_num": 1,
      "grh": {{"dgid": "00000000000000000000ffffc0a80114", "flow_label": 0, "sgid_index": 3, "hop_limit": 64, "traffic_class": 0}}}}}},
  "kernel": {{"ret": "0 if neighbour resolution succeeds, else its negative errno", "errno": null,
    "rdma_ah_attr": {{"type": "ROCE", "ah_flags": 1, "sl": 0, "port_num": 1, "dlid": null, "src_path_bits": null,
      "grh": {{"dgid": "00000000000000000000ffffc0a80114", "flow_label": 0, "sgid_index": 3,
        "hop_limit": "route hop limit (64 with default sysctls); 255 if resolution fails", "traffic_class": 0, "sgid_attr_index": 3}},
      "roce_dmac": "neighbour MAC of grh.dgid (resolved via IP stack)"}}}}}},
{{"id": 2, "name": "null", "port": {port}, "wc": {{"wc_flags": 0}}, "grh": null,
  "libibverbs": {{"outcome": "SIGSEGV (NULL grh dereferenced)"}},
  "kernel": {{"outcome": "NULL pointer dereference"}}}}
  ],
  "notes": []
}}"#
    );
    let all = load_str(&doc, None).unwrap();
    assert_eq!(all.len(), 4);
    for lc in &all {
        assert_eq!(lc.case.check().unwrap(), vec![], "{}", lc.case.name());
    }
    assert_eq!(all[1].case.profile(), Profile::Kernel);
    let Expect::Kernel(k) = &all[1].case.expect else { panic!("kernel expected") };
    let a = k.ah_attr.unwrap();
    assert_eq!((a.grh.hop_limit.0, a.roce.unwrap().dmac.0), (HopLimit::Route, Dmac::Resolve));
    assert_eq!(load_str(&doc, Some(Profile::Kernel)).unwrap().len(), 2);
    // Unknown prose is an error with a line, not a guess.
    let e = load_str(&doc.replace("\"0 if neighbour", "\"maybe"), None).unwrap_err();
    assert!(e.message.contains("case id 1"), "{e}");
}

#[test]
fn over_capacity_is_a_case_error() {
    let big = IB_NO_GRH.replace("\"gid_tbl_len\":4", "\"gid_tbl_len\":65536").replace("\"index\":2", "\"index\":5000");
    let cases = load_str(&big, None).unwrap();
    assert_eq!(cases[0].case.check(), Err(CaseError::OverCapacity { index: 5000 }));
    let slid = IB_NO_GRH.replace("\"slid\":7", "\"slid\":70000");
    let cases = load_str(&slid, None).unwrap();
    assert_eq!(cases[0].case.check(), Err(CaseError::OutOfRange { field: "wc.slid", value: 70000 }));
}
