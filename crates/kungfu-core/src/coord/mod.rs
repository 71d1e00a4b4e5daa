pub mod group;
