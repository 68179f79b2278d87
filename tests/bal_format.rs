//! The bundle-adjustment example's BAL reader and problem (examples/common/bal.rs): a file
//! written in the BAL text format reads back as the scene it was written from, and the
//! solve from a perturbed start reaches below the true scene's cost.

#[path = "../examples/common/bal.rs"]
mod bal;

use bal::{Bal, BalBuffers};
use gradfuse::{Device, LevenbergMarquardt, Loss};
use std::fmt::Write as _;

/// `bal` in the BAL text format.
fn to_text(bal: &Bal) -> String {
    let mut t = format!(
        "{} {} {}\n",
        bal.cameras.len(),
        bal.points.len(),
        bal.observed.len()
    );
    for ((c, p), o) in bal.camera_of.iter().zip(&bal.point_of).zip(&bal.observed) {
        let _ = writeln!(t, "{c} {p} {:e} {:e}", o[0], o[1]);
    }
    for v in bal
        .cameras
        .iter()
        .flatten()
        .chain(bal.points.iter().flatten())
    {
        let _ = writeln!(t, "{v:e}");
    }
    t
}

#[test]
fn a_bal_file_reads_back_and_solves() {
    let (start, truth) = Bal::synthetic(4, 60, 3, 0.5, 3);
    let dir = std::env::temp_dir().join(format!("gradfuse-bal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("problem.txt");
    std::fs::write(&path, to_text(&start)).unwrap();
    let read = Bal::read(&path).unwrap();
    assert_eq!(read.cameras, start.cameras);
    assert_eq!(read.points, start.points);
    assert_eq!(read.observed, start.observed);
    assert_eq!(
        (read.camera_of, read.point_of),
        (start.camera_of.clone(), start.point_of.clone())
    );
    // A truncated file and an observation of a camera that is not there are errors.
    let text = to_text(&start);
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    assert!(Bal::read(&path).is_err());
    std::fs::write(&path, text.replacen("\n0 ", "\n9 ", 1)).unwrap();
    assert!(Bal::read(&path).is_err());
    let _ = std::fs::remove_dir_all(&dir);

    let d = Device::cpu();
    let true_cost = BalBuffers::new(&d, &truth)
        .unwrap()
        .problem(&d, Loss::Squared, true)
        .unwrap()
        .0
        .cost()
        .unwrap();
    let b = BalBuffers::new(&d, &start).unwrap();
    let (problem, _) = b.problem(&d, Loss::Squared, true).unwrap();
    let s = LevenbergMarquardt::default().solve(&problem).unwrap();
    assert!(
        s.final_cost <= true_cost * 1.001,
        "{s}\ntrue cost {true_cost}"
    );
    assert!(s.initial_cost > 10.0 * true_cost);
}
