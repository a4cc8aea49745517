//! Issue 63: the default build carries no network stack. Several nodes (`train_data_parallel_on_nodes`,
//! the orchestrator) are then refused with the feature that enables them, before any step or bind;
//! `multinode.rs` runs them with `--features nodes`.

use crate::data_parallel_setup::{data, model, training};
use tint_cgt::nodes::{run_orchestrator, NodeSetup};
use tint_cgt::train::RunFiles;
use tint_cgt::train_data_parallel_on_nodes;

#[test]
fn several_nodes_without_the_feature_are_refused_by_name() {
    let data = data(4);
    let setup = NodeSetup::new(0, 2, "ws://127.0.0.1:9", "ws://127.0.0.1:10");
    let mut steps = 0;
    let err = train_data_parallel_on_nodes(
        model(&data),
        &data,
        &training(),
        &RunFiles::default(),
        &[Default::default()],
        &setup,
        &mut |_| steps += 1,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("no network for several nodes") && err.contains("`nodes`"),
        "{err}"
    );
    assert_eq!(steps, 0);
    let err = run_orchestrator(3000).unwrap_err().to_string();
    assert!(err.contains("no network for several nodes"), "{err}");
}
