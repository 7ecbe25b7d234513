//! Address over time per data object: the access pattern inside each of the most sampled
//! objects, as [NMO paper §VI-C, figs. 4–6] plots it for STREAM's arrays and CFD's variables
//! (address against time within a tagged phase). Here the address is the offset into the
//! object, so each object's plot starts at 0 whatever its placement.
//!
//! The points come from the report's timeline, a uniform sample (reservoir) of the selected
//! accesses: an object's points are then a uniform sample of its own accesses too, and the
//! view costs no memory beyond the timeline's bound. The price is that an object gets points
//! in proportion to its share of the accesses (an object with 1 % of them gets ~1 % of the
//! timeline's points); [`ObjectTimeline::samples`] says how many accesses its points stand
//! for. Per-object reservoirs would give small objects more points, but need a reservoir for
//! every object before it is known which are the most sampled (docs/report.md).

pub use crate::model::{ObjectPoint, ObjectTimeline};
use crate::model::{ObjectRow, Timeline};

/// How many objects get a view by default (fewer when the report lists fewer objects).
pub const DEFAULT_OBJECTS: usize = 8;

/// The views of the first `n` objects of `objects` (most sampled first, as the report lists
/// them), from the points of `timeline` (whose `object` indexes `objects`).
pub fn per_object(objects: &[ObjectRow], timeline: &Timeline, n: usize) -> Vec<ObjectTimeline> {
    let n = n.min(objects.len());
    let mut points: Vec<Vec<ObjectPoint>> = vec![Vec::new(); n];
    for p in &timeline.points {
        if let Some(i) = p.object.filter(|&i| i < n) {
            points[i].push(ObjectPoint {
                t_ns: p.t_ns,
                // An address below the start cannot be attributed to the object; saturate
                // rather than wrap should an attribution ever allow it.
                offset_bytes: p.address.saturating_sub(objects[i].start),
                store: p.store,
            });
        }
    }
    objects
        .iter()
        .zip(points)
        .enumerate()
        .map(|(i, (o, mut pts))| {
            pts.sort_by_key(|p| (p.t_ns, p.offset_bytes));
            ObjectTimeline {
                object: i,
                name: o.name.clone(),
                size_bytes: o.size,
                samples: o.stats.samples,
                first_t_ns: pts.first().map(|p| p.t_ns),
                last_t_ns: pts.last().map(|p| p.t_ns),
                min_offset_bytes: pts.iter().map(|p| p.offset_bytes).min(),
                max_offset_bytes: pts.iter().map(|p| p.offset_bytes).max(),
                points: pts,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GroupStats, TimelinePoint};

    fn object(name: &str, start: u64, size: u64, samples: u64) -> ObjectRow {
        ObjectRow {
            name: name.into(),
            kind: "global".into(),
            dso: None,
            start,
            size,
            stats: GroupStats {
                samples,
                ..Default::default()
            },
        }
    }

    fn point(t_ns: u64, address: u64, object: Option<usize>) -> TimelinePoint {
        TimelinePoint {
            t_ns,
            address,
            object,
            store: t_ns == 30,
            source: None,
            total_latency: None,
        }
    }

    #[test]
    fn points_become_offsets_in_their_object() {
        let objects = [
            object("a", 0x1000, 0x100, 3),
            object("b", 0x8000, 0x40, 1),
            object("c", 0x9000, 8, 1),
        ];
        let timeline = Timeline {
            population: 6,
            points: vec![
                point(10, 0x1010, Some(0)),
                point(20, 0x8038, Some(1)),
                point(30, 0x10f8, Some(0)),
                point(40, 0x5000, None),
                point(50, 0x1000, Some(0)),
                point(60, 0x9000, Some(2)),
            ],
        };
        let v = per_object(&objects, &timeline, 2);
        assert_eq!(v.len(), 2, "only the first n objects");
        let a = &v[0];
        assert_eq!((a.object, a.name.as_str(), a.samples), (0, "a", 3));
        let pts: Vec<(u64, u64, bool)> = a
            .points
            .iter()
            .map(|p| (p.t_ns, p.offset_bytes, p.store))
            .collect();
        assert_eq!(
            pts,
            vec![(10, 0x10, false), (30, 0xf8, true), (50, 0, false)]
        );
        assert_eq!((a.first_t_ns, a.last_t_ns), (Some(10), Some(50)));
        assert_eq!(
            (a.min_offset_bytes, a.max_offset_bytes),
            (Some(0), Some(0xf8))
        );
        assert_eq!(v[1].points.len(), 1);
        assert_eq!(v[1].points[0].offset_bytes, 0x38);
        assert_eq!(v[1].size_bytes, 0x40);
    }

    #[test]
    fn an_object_without_points_has_no_spans() {
        let v = per_object(&[object("a", 0, 8, 1)], &Timeline::default(), 8);
        assert_eq!(v.len(), 1);
        assert!(v[0].points.is_empty());
        assert_eq!((v[0].first_t_ns, v[0].min_offset_bytes), (None, None));
    }
}
