/// The built-in `demo` scenario (also Scenarios/demo.json; a test keeps the two identical), so
/// `locationctl simulate demo` works from any directory.
public let demoScenarioJSON = #"""
{
  "name": "demo",
  "description": "A 23-minute urban trip in Berlin: a stay at Alexanderplatz, a 1.9 km drive, a stay at Gendarmenmarkt, a 280 m walk, a stay. Three visits.",
  "start": "2026-05-04T08:30:00Z",
  "origin": {"latitude": 52.520008, "longitude": 13.404954},
  "sampleInterval": 1,
  "seed": 1,
  "minimumVisit": 300,
  "outdoor": {"sigma": 3, "outlierRate": 0.002, "outlierDistance": 250},
  "legs": [
    {"stay": 330, "place": "Alexanderplatz"},
    {"drive": {"latitude": 52.516275, "longitude": 13.377704}, "speed": 11},
    {"stay": 330, "place": "Gendarmenmarkt"},
    {"walk": {"latitude": 52.518620, "longitude": 13.376187}},
    {"stay": 330, "place": "Friedrichstraße"}
  ]
}

"""#
